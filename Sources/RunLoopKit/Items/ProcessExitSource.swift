import Synchronization

/// A Source1 that fires once, when a process exits: any process this one may `pidfd_open`, not
/// only its children (CF, GLib, sd-event and libuv watch children only; Binder's `linkToDeath`
/// is Android's alone). A daemon watches its clients with one: their process comes pinned with
/// each message (`message.sender?.process`).
///
/// Add it to a loop with `ThreadRunLoop.add(_:forMode:)`. Its handler runs exactly once, on
/// that loop's thread, while the loop runs one of the source's modes: in the pass after the
/// process exits, or in the next pass for a process that has exited already. The source is
/// invalid from then on and leaves its loop. Until it has fired or is invalidated it keeps its
/// modes alive, as any Source1 does, and the loop holds it (and the process's pidfd).
///
/// The process exiting is what counts, not its parent reaping it: a child that has exited but
/// not been waited for fires the source; reap children yourself (waitpid) as usual.
public final class ProcessExitSource: Sendable {
    /// The process watched. Any thread; free.
    public let process: PinnedProcess
    private let handler: @Sendable (ProcessExitSource) -> Void
    /// The pidfd, watched by the loop: readable once the process has exited.
    private let watch: FileDescriptorSource
    private let state = Atomic<UInt8>(ProcessExitSource.armed)
    private let link: SourceLink

    private static let armed: UInt8 = 0
    private static let fired: UInt8 = 1
    private static let invalidated: UInt8 = 2

    /// A source that calls `handler` when `process` exits. Sources of one mode ready in the
    /// same pass run in readiness order, as fd sources do (`order` sorts sources of one
    /// descriptor). Any thread; no system call until it is added to a loop, and one epoll_ctl
    /// per mode then.
    public init(process: PinnedProcess, order: Int = 0,
                handler: @escaping @Sendable (ProcessExitSource) -> Void) {
        self.process = process
        self.handler = handler
        // The watch holds the source until it fires or is invalidated (a loop holds its items
        // only through them), and the source holds the process, so its pidfd stays open while
        // the loop watches it.
        let link = SourceLink()
        watch = FileDescriptorSource(fileDescriptor: process.descriptor, events: .readable, order: order,
                                     itemName: "ProcessExitSource", calloutKind: .processExit) { _, _ in
            link.source?.fire()
        }
        self.link = link
        link.source = self
    }

    /// A name for the source's callouts in loop-health reports (`ThreadRunLoop.Callout.label`).
    /// Any thread; a lock.
    public var label: String? {
        get { watch.label }
        set { watch.label = newValue }
    }

    /// Stops the source: its handler never runs after this returns (unless it is running already,
    /// on the loop's thread), and it leaves its loop. Idempotent. Any thread; one epoll_ctl per mode.
    public func invalidate() {
        if state.compareExchange(expected: Self.armed, desired: Self.invalidated, ordering: .acquiringAndReleasing).exchanged {
            finish()
        }
    }

    /// False once it has fired or been invalidated. Any thread; one atomic load.
    public var isValid: Bool { state.load(ordering: .acquiring) == Self.armed }

    /// The one place the handler is called: on the loop's thread, when the pidfd is readable, unless it already fired or was
    /// invalidated. The source leaves its loop before the handler runs, so a handler that runs
    /// the loop again (or whose mode held nothing else) sees it gone.
    private func fire() {
        guard state.compareExchange(expected: Self.armed, desired: Self.fired, ordering: .acquiringAndReleasing).exchanged else {
            return
        }
        finish()
        handler(self)
    }

    /// Leaves the loop and lets the watch go of this source.
    private func finish() {
        watch.invalidate()
        link.source = nil
    }

    /// The loop-side item: the pidfd's fd source.
    fileprivate var fileDescriptorSource: FileDescriptorSource { watch }
}

/// The watch's link back to its source: strong until the source fires or is invalidated, then
/// cleared, which ends the cycle between them.
private final class SourceLink: @unchecked Sendable {
    // Set once during the source's init (before the watch can be added to any loop, which
    // publishes it to the loop's thread), then cleared once under the source's state change.
    private let storage = Locked<ProcessExitSource?>(nil)
    var source: ProcessExitSource? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
}

extension ThreadRunLoop {
    /// Watches `source`'s process in `mode` (`.common`: every common mode). A source belongs to
    /// one loop at most: adding it to a second loop is a precondition failure. Adding an invalid
    /// source (fired or invalidated) does nothing. Any thread; one epoll_ctl.
    public func add(_ source: ProcessExitSource, forMode mode: Mode) {
        add(source.fileDescriptorSource, forMode: mode)
    }

    /// Stops watching `source` in `mode`; it stays valid. Any thread; one epoll_ctl.
    public func remove(_ source: ProcessExitSource, forMode mode: Mode) {
        remove(source.fileDescriptorSource, forMode: mode)
    }
}

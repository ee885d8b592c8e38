import Synchronization

/// A Source0: a custom input source that a client marks pending with `signal()` and whose
/// `perform` callout the loop runs on its own thread in the next pass of a mode that holds it.
///
/// As with CFRunLoopSourceSignal, signalling does not wake a sleeping loop: follow it with
/// `ThreadRunLoop.wakeUp()`. A source may be in several modes of several loops.
public final class RunLoopSource: Sendable, RunLoopItem, CustomStringConvertible {
    /// Sources in one mode perform in ascending `order`. Any thread; free.
    public let order: Int
    private let scheduleCallout: (@Sendable (ThreadRunLoop, ThreadRunLoop.Mode) -> Void)?
    private let cancelCallout: (@Sendable (ThreadRunLoop, ThreadRunLoop.Mode) -> Void)?
    private let performCallout_: @Sendable () -> Void
    private let signalled = Atomic<Bool>(false)
    private let valid = Atomic<Bool>(true)
    /// The loops the source is in (for `invalidate()`) and its label.
    private let attachment = Locked(Attachment())

    private struct Attachment {
        var loops: [ThreadRunLoop] = []
        var label: String?
    }

    /// Creates a source. `schedule` runs on the thread that adds the source to a loop mode,
    /// once per mode; `cancel` on the thread that removes it or invalidates it; `perform` on
    /// the loop's thread. Any thread.
    public init(order: Int = 0,
                schedule: (@Sendable (ThreadRunLoop, ThreadRunLoop.Mode) -> Void)? = nil,
                cancel: (@Sendable (ThreadRunLoop, ThreadRunLoop.Mode) -> Void)? = nil,
                perform: @escaping @Sendable () -> Void) {
        self.order = order
        scheduleCallout = schedule
        cancelCallout = cancel
        performCallout_ = perform
    }

    /// Marks the source pending. It performs once in the next pass of a loop holding it, however
    /// often it was signalled. Does NOT wake the loop. Any thread; one atomic store.
    public func signal() {
        signalled.store(true, ordering: .releasing)
    }

    /// Whether the source is pending. Any thread; one atomic load.
    public var isSignalled: Bool { signalled.load(ordering: .acquiring) }

    /// Removes the source from every loop and mode (its cancel callout runs for each, on the
    /// calling thread); it can never be scheduled again. Idempotent. Any thread.
    public func invalidate() {
        guard valid.exchange(false, ordering: .acquiringAndReleasing) else { return }
        for loop in attachment.withLock({ $0.loops }) { loop.removeEverywhere(self) }
    }

    /// False once `invalidate()` was called. Any thread; one atomic load.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// A name for the source's callouts in loop-health reports (`ThreadRunLoop.Callout.label`),
    /// e.g. "config reload". Read only when a callout is reported, so it costs the loop nothing
    /// otherwise. Any thread; a lock.
    public var label: String? {
        get { attachment.withLock { $0.label } }
        set { attachment.withLock { $0.label = newValue } }
    }

    /// The order, signal and validity, for logs. Any thread; allocates the string.
    public var description: String {
        "RunLoopSource(order: \(order), signalled: \(isSignalled), valid: \(isValid))"
    }

    // MARK: - Loop side

    static var itemKind: WritableKeyPath<ItemSet, [RunLoopSource]> { \.sources }
    var sortOrder: Int? { order }

    /// Clears the signal; true when it was set.
    func takeSignal() -> Bool {
        signalled.exchange(false, ordering: .acquiringAndReleasing)
    }

    func performCallout() { performCallout_() }

    func attach(to loop: ThreadRunLoop) -> Bool {
        attachment.withLock { attachment in
            guard isValid else { return false }
            if !attachment.loops.contains(where: { $0 === loop }) { attachment.loops.append(loop) }
            return true
        }
    }

    func detach(from loop: ThreadRunLoop) {
        attachment.withLock { $0.loops.removeAll { $0 === loop } }
    }

    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) { scheduleCallout?(loop, mode) }
    func didCancel(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) { cancelCallout?(loop, mode) }
}

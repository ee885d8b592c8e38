import CSystemd
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// Runs an existing sd-event loop (`sd_event *`, from libsystemd) inside a `ThreadRunLoop`
/// mode, so sd-bus, sd-event timers and io sources work in a RunLoopKit daemon.
///
/// How: the sd-event epoll descriptor (`sd_event_get_fd`) is scheduled as a readable
/// `FileDescriptorSource`, and a `RunLoopObserver` on `.beforeWaiting` runs
/// `sd_event_prepare` before the loop sleeps (that is when sd-event arms its timerfds, and
/// dispatches whatever is already pending). When the loop wakes on the descriptor the bridge
/// calls `sd_event_wait(0)` and `sd_event_dispatch`, the phase split `sd_event_wait(3)`
/// documents for foreign loops. sd-event timers therefore wake a sleeping loop through
/// their timerfd, with no polling.
///
/// Only the modes the bridge is added to service sd-event: while the loop runs another mode,
/// sd-event callbacks wait. One bridge per `sd_event`, on one loop (sd-event is
/// single-threaded): every sd-event callback runs on that loop's thread, and you must use
/// the `sd_event` only from there while the bridge is valid.
///
/// ```swift
/// var event: OpaquePointer?
/// sd_event_new(&event)
/// let bridge = try SDEventBridge(event: event!)
/// bridge.add(to: .current, forMode: .default)
/// ThreadRunLoop.current.run()
/// ```
public final class SDEventBridge: Sendable {
    /// Why the bridge stopped driving its sd-event loop.
    public enum Completion: Sendable, Equatable {
        /// `sd_event_exit` was called and the exit sources ran; the code it was given.
        case exited(code: Int32)
        /// An sd-event call failed with this errno (e.g. ESTALE after fork).
        case failed(errno: Int32)
    }

    /// Why a bridge could not be created.
    public enum Failure: Error, Equatable, Sendable {
        /// `sd_event_get_fd` failed with this errno (e.g. the loop already finished).
        case invalidEvent(errno: Int32)
    }

    private let pump: SDEventPump
    private let descriptorSource: FileDescriptorSource
    private let observer: RunLoopObserver

    /// Wraps `event` (takes its own reference with `sd_event_ref`, dropped when the bridge and
    /// its loop let go). `onCompletion` runs on the loop's thread once, when sd-event
    /// finishes or fails; the bridge has invalidated itself by then. Any thread; one
    /// `sd_event_get_fd` call and three allocations.
    public init(event: OpaquePointer,
                onCompletion: (@Sendable (Completion) -> Void)? = nil) throws(Failure) {
        let fd = sd_event_get_fd(event)
        guard fd >= 0 else { throw .invalidEvent(errno: -fd) }
        let pump = SDEventPump(event: event, onCompletion: onCompletion)
        self.pump = pump
        descriptorSource = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
            pump.run(beforeWaiting: false)
        }
        observer = RunLoopObserver(activities: .beforeWaiting) { _, _ in
            pump.run(beforeWaiting: true)
        }
        // Weak: the pump is owned by the two items' handlers, so strong references back
        // would keep the items, the pump and the sd_event alive forever.
        pump.stop = { [weak descriptorSource, weak observer] in
            descriptorSource?.invalidate()
            observer?.invalidate()
        }
    }

    deinit {
        invalidate()
    }

    /// Schedules the bridge in `mode` of `loop` (several modes of one loop are fine; a
    /// second loop is a precondition failure). Any thread; the cost of adding one fd
    /// source and one observer.
    public func add(to loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode) {
        pump.claim(loop)
        loop.add(descriptorSource, forMode: mode)
        loop.add(observer, forMode: mode)
    }

    /// Unschedules the bridge from `mode` of `loop`; it stays valid. Any thread.
    public func remove(from loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode) {
        loop.remove(descriptorSource, forMode: mode)
        loop.remove(observer, forMode: mode)
    }

    /// Stops driving sd-event and removes the bridge from every mode. The `sd_event` itself
    /// is left as it is (not exited, not freed). Idempotent; any thread.
    public func invalidate() {
        descriptorSource.invalidate()
        observer.invalidate()
    }

    /// False after `invalidate()` or once sd-event finished. Any thread.
    public var isValid: Bool { descriptorSource.isValid }
}

/// The sd-event state machine driver. Every method except `claim` and the `stop`
/// setter runs on the bridged loop's thread, the only thread that touches the `sd_event`.
private final class SDEventPump: @unchecked Sendable {
    private let event: OpaquePointer
    private let onCompletion: (@Sendable (SDEventBridge.Completion) -> Void)?
    private let owner = Locked<ObjectIdentifier?>(nil)
    private let stopper = Locked<(@Sendable () -> Void)?>(nil)
    private var finished = false   // loop thread only

    /// Most sd-event dispatches per call; past it the loop is woken to come back, so a busy
    /// sd-event cannot starve the loop's other sources.
    private static let budget = 64

    init(event: OpaquePointer, onCompletion: (@Sendable (SDEventBridge.Completion) -> Void)?) {
        self.event = sd_event_ref(event)
        self.onCompletion = onCompletion
    }

    deinit {
        sd_event_unref(event)
    }

    var stop: (@Sendable () -> Void)? {
        get { stopper.withLock { $0 } }
        set { stopper.withLock { $0 = newValue } }
    }

    func claim(_ loop: ThreadRunLoop) {
        let id = ObjectIdentifier(loop)
        owner.withLock { current in
            precondition(current == nil || current == id,
                         "SDEventBridge added to a second ThreadRunLoop: an sd_event is single-threaded, bridge it into one loop only")
            current = id
        }
    }

    /// Advances sd-event as far as it can go without blocking: dispatches what is pending
    /// and leaves it ARMED (timers armed, ready to be woken through its epoll descriptor).
    func run(beforeWaiting: Bool) {
        guard !finished else { return }
        for _ in 0..<Self.budget {
            let state = sd_event_get_state(event)
            let result: Int32
            switch state {
            case Int32(SD_EVENT_INITIAL):
                result = sd_event_prepare(event)
                if result == 0 { return }              // ARMED: nothing pending, timers armed
            case Int32(SD_EVENT_ARMED):
                result = sd_event_wait(event, 0)       // collect what woke us, never block
                if result == 0 { continue }            // back to INITIAL: prepare again
            case Int32(SD_EVENT_PENDING):
                result = 1
            case Int32(SD_EVENT_FINISHED):
                return complete(exitCode())
            default:
                // RUNNING/EXITING/PREPARING: called re-entrantly from an sd-event callback
                // that ran this loop nested. sd-event continues when that callback returns.
                return
            }
            if result < 0 { return complete(.failed(errno: -result)) }
            let dispatched = sd_event_dispatch(event)
            if dispatched < 0 { return complete(.failed(errno: -dispatched)) }
            if dispatched == 0 || sd_event_get_state(event) == Int32(SD_EVENT_FINISHED) {
                return complete(exitCode())
            }
        }
        // Budget spent with work left: make sure the loop comes straight back.
        if beforeWaiting { ThreadRunLoop.current.wakeUp() }
    }

    private func exitCode() -> SDEventBridge.Completion {
        var code: Int32 = 0
        let rc = sd_event_get_exit_code(event, &code)
        return rc < 0 ? .failed(errno: -rc) : .exited(code: code)
    }

    private func complete(_ completion: SDEventBridge.Completion) {
        guard !finished else { return }
        finished = true
        stop?()
        onCompletion?(completion)
    }
}

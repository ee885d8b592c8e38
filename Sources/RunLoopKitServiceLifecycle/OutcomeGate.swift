#if ServiceLifecycle
import RunLoopKit

/// A drain's outcome, set once by whichever side gets there first (the loop's observer or the
/// timeout) and awaited by the draining task.
final class OutcomeGate: Sendable {
    private struct State {
        var outcome: PortDrain.Outcome?
        var waiter: CheckedContinuation<PortDrain.Outcome, Never>?
    }

    // RunLoopKit's pthread-mutex box: ThreadSanitizer sees it, unlike Synchronization.Mutex.
    private let state = Locked(State())

    /// Sets the outcome unless one is set already, and resumes the waiter. Any thread; a lock.
    func open(_ outcome: PortDrain.Outcome) {
        let waiter: CheckedContinuation<PortDrain.Outcome, Never>? = state.withLock { state in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    /// The outcome, suspending until it is set. One waiter at a time.
    func outcome() async -> PortDrain.Outcome {
        await withCheckedContinuation { continuation in
            let outcome: PortDrain.Outcome? = state.withLock { state in
                if let outcome = state.outcome { return outcome }
                state.waiter = continuation
                return nil
            }
            if let outcome { continuation.resume(returning: outcome) }
        }
    }
}
#endif

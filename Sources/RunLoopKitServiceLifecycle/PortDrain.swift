#if ServiceLifecycle
import RunLoopKit

/// Waits until a set of ports has delivered what was queued on them, watching from the thread
/// of the loop that delivers their messages: the ports are drained when that loop is about to
/// sleep (or is running a block) and every queue is empty. Nothing polls: the loop reports at
/// its own `.beforeWaiting`, and the bound is a sleep of the waiting task.
enum PortDrain {
    enum Outcome: Sendable, Equatable {
        /// Every queue was empty (or its port invalidated) while the loop was idle.
        case drained
        /// The timeout passed, or the waiting task was cancelled, first.
        case timedOut
    }

    /// Waits until every port in `ports` has an empty queue, as seen on `loop`'s thread, or
    /// until `timeout` passes. Cancelling the calling task ends the wait as a timeout.
    /// Any task; it suspends, holding no thread.
    static func wait(for ports: [MessagePort], deliveredBy loop: ThreadRunLoop,
                     timeout: Duration) async -> Outcome {
        let gate = OutcomeGate()
        let check: @Sendable () -> Void = {
            if ports.allSatisfy({ !$0.isValid || $0.queuedCount == 0 }) { gate.open(.drained) }
        }
        // An idle loop about to sleep is the moment every message it could deliver has been
        // delivered; a loop already asleep runs the block once and reaches `.beforeWaiting` again.
        let observer = RunLoopObserver(activities: .beforeWaiting) { _, _ in check() }
        loop.add(observer, forMode: .common)
        loop.perform(inModes: [.common], check)
        defer { observer.invalidate() }

        return await withTaskGroup(of: Void.self) { group in
            // The bound: a child task's sleep, which also ends (at once) when the caller is
            // cancelled, since child tasks inherit cancellation.
            group.addTask {
                try? await Task.sleep(for: timeout)
                gate.open(.timedOut)
            }
            let outcome = await gate.outcome()
            group.cancelAll()
            return outcome
        }
    }
}
#endif

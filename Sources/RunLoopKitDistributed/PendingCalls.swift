import FoundationEssentials
import RunLoopKit

/// The calls a system has sent and not yet had answered, by call id, each with its session and
/// its deadline. A reply may arrive before the calling task has suspended (the callee answers
/// faster than the caller parks): it is kept until the task asks for it. One timer on the
/// system's loop serves every deadline: it is set for the earliest one only when a call's
/// deadline comes before the timer's, so a steady stream of calls with the same timeout arms it
/// once per timeout; when it fires it fails the calls that are due and is set for the next.
final class PendingCalls: Sendable {
    private struct Entry {
        var continuation: UnsafeContinuation<MessagePort.Message, any Error>?
        var outcome: Result<MessagePort.Message, any Error>?
        let session: ObjectIdentifier
        let deadline: ContinuousClock.Instant
    }

    private struct State {
        var entries: [UInt64: Entry] = [:]
        var lastID: UInt64 = 0
        /// When the timer fires; nil when none is set.
        var timerDate: ContinuousClock.Instant?
        var timer: RunLoopTimer?
    }

    private let state = Locked(State())
    private let loop: ThreadRunLoop

    init(loop: ThreadRunLoop) {
        self.loop = loop
    }

    /// A new call id for a call of `session` due by `deadline`. Any thread; a lock, and a timer
    /// set on the loop when this deadline is the earliest.
    func register(session: ObjectIdentifier, deadline: ContinuousClock.Instant) -> UInt64 {
        let (id, stale): (UInt64, RunLoopTimer?) = state.withLock { state in
            state.lastID &+= 1
            if state.lastID == 0 { state.lastID = 1 }
            state.entries[state.lastID] = Entry(session: session, deadline: deadline)
            guard state.timerDate.map({ deadline < $0 }) ?? true else { return (state.lastID, nil) }
            let stale = state.timer
            state.timerDate = deadline
            let timer = RunLoopTimer(fireAt: deadline) { [weak self] _ in self?.expire() }
            state.timer = timer
            loop.add(timer, forMode: .common)
            return (state.lastID, stale)
        }
        stale?.invalidate()
        return id
    }

    /// Suspends until call `id` is answered, fails or is due. Throws the failure. The calling task.
    func outcome(of id: UInt64) async throws -> MessagePort.Message {
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { (continuation: UnsafeContinuation<MessagePort.Message, any Error>) in
                let known: Result<MessagePort.Message, any Error>? = state.withLock { state in
                    guard let entry = state.entries[id] else { return .failure(CancellationError()) }
                    if let outcome = entry.outcome {
                        state.entries[id] = nil
                        return outcome
                    }
                    state.entries[id]!.continuation = continuation
                    return nil
                }
                if let known { continuation.resume(with: known) }
            }
        } onCancel: {
            complete(id, with: .failure(CancellationError()))
        }
    }

    /// Records call `id`'s outcome and resumes its task. False when `session` has no call of
    /// that id waiting (a reply that answers no call of its session). Any thread; a lock.
    @discardableResult
    func complete(_ id: UInt64, of session: ObjectIdentifier? = nil, with outcome: Result<MessagePort.Message, any Error>) -> Bool {
        let continuation: UnsafeContinuation<MessagePort.Message, any Error>?? = state.withLock { state in
            guard let entry = state.entries[id], session.map({ $0 == entry.session }) ?? true,
                  entry.outcome == nil else { return .none }
            if let continuation = entry.continuation {
                state.entries[id] = nil
                return .some(continuation)
            }
            state.entries[id]!.outcome = outcome
            return .some(nil)
        }
        guard let continuation else { return false }
        continuation?.resume(with: outcome)
        return true
    }

    /// Forgets call `id`, which was never sent. Any thread; a lock.
    func discard(_ id: UInt64) {
        _ = state.withLock { $0.entries.removeValue(forKey: id) }
    }

    /// Fails every call of `session` with `error`. Any thread; a lock and a pass over the calls.
    func fail(session: ObjectIdentifier, with error: any Error) {
        let ids = state.withLock { state in state.entries.filter { $0.value.session == session }.map(\.key) }
        for id in ids { complete(id, with: .failure(error)) }
    }

    /// Fails every call with `error` (the system shut down). Any thread.
    func failAll(with error: any Error) {
        let (ids, timer) = state.withLock { state in
            defer { state.timer = nil; state.timerDate = nil }
            return (Array(state.entries.keys), state.timer)
        }
        timer?.invalidate()
        for id in ids { complete(id, with: .failure(error)) }
    }

    /// The timer fired: fails the calls that are due and sets the timer for the next deadline.
    /// The system's loop thread.
    private func expire() {
        let now = ContinuousClock.now
        let due: [UInt64] = state.withLock { state in
            state.timer = nil
            state.timerDate = nil
            let due = state.entries.filter { $0.value.deadline <= now && $0.value.outcome == nil }.map(\.key)
            if let next = state.entries.values.filter({ $0.deadline > now && $0.outcome == nil }).map(\.deadline).min() {
                state.timerDate = next
                let timer = RunLoopTimer(fireAt: next) { [weak self] _ in self?.expire() }
                state.timer = timer
                loop.add(timer, forMode: .common)
            }
            return due
        }
        for id in due { complete(id, with: .failure(PortActorSystemError.callTimedOut)) }
    }
}

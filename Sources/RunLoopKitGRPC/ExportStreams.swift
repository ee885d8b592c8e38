#if GRPC
import Synchronization

/// The end of one served stream, signalled from outside it: its exported port was invalidated
/// or its name unexported. The stream's task waits for it beside its reading and writing, and
/// ends the RPC with `unavailable` when it comes, so the client learns at once rather than at
/// the stream's next message.
final class StreamEnd: Sendable {
    private struct State {
        var reason: String?
        var waiter: CheckedContinuation<String?, Never>?
        var cancelled = false
    }

    private let state = Mutex(State())

    /// Ends the stream for `reason`; later calls are ignored. Any thread; a lock.
    func fire(_ reason: String) {
        let waiter: CheckedContinuation<String?, Never>? = state.withLock { state in
            guard state.reason == nil else { return nil }
            state.reason = reason
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: reason)
    }

    /// The reason the stream must end, once it must; nil if the waiting task is cancelled
    /// first (the stream ended by itself). One waiter at a time.
    func wait() async -> String? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now: String?? = state.withLock { state in
                    if let reason = state.reason { return .some(reason) }
                    if state.cancelled { return .some(nil) }
                    state.waiter = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            let waiter: CheckedContinuation<String?, Never>? = state.withLock { state in
                state.cancelled = true
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume(returning: nil)
        }
    }
}

/// The open streams of one export, ended together when the exported port is invalidated or
/// the name unexported. A stream that arrives after that is refused.
final class ExportStreams: Sendable {
    private struct State {
        var streams: [ObjectIdentifier: StreamEnd] = [:]
        var ended: String?
    }

    private let state = Mutex(State())

    /// Adds an open stream; false (and not added) once the export has ended. Any thread.
    func add(_ stream: StreamEnd) -> Bool {
        state.withLock { state in
            guard state.ended == nil else { return false }
            state.streams[ObjectIdentifier(stream)] = stream
            return true
        }
    }

    /// Forgets a stream that ended. Any thread.
    func remove(_ stream: StreamEnd) {
        _ = state.withLock { $0.streams.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    /// Ends every open stream for `reason`, and refuses later ones. Idempotent. Any thread;
    /// runs on the thread that invalidates the port, so it only signals.
    func endAll(_ reason: String) {
        let streams: [StreamEnd] = state.withLock { state in
            guard state.ended == nil else { return [] }
            state.ended = reason
            defer { state.streams = [:] }
            return Array(state.streams.values)
        }
        for stream in streams { stream.fire(reason) }
    }
}
#endif

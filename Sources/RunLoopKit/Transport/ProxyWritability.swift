/// Where async senders of proxies wait for room without holding a thread: the `AsyncHost`
/// thread's loop watches, for each waiting sender, the proxy's socket (writable) and its
/// invalidation bell (readable).
enum ProxyWritability {

    /// Suspends until `socket` can take a frame (`.room`), `bell` rings (`.invalidated`) or the
    /// task is cancelled (`.cancelled`). Any task; two epoll registrations on the async host.
    static func wait(for socket: SeqPacketSocket, bell: EventFD) async -> SenderWake {
        let waiter = Waiter()
        return await withTaskCancellationHandler {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<SenderWake, Never>) in
                let writable = FileDescriptorSource(fileDescriptor: socket.descriptor.rawValue, events: .writable) { _, _ in
                    waiter.finish(.room)
                }
                let invalidated = FileDescriptorSource(fileDescriptor: bell.descriptor.rawValue, events: .readable) { _, _ in
                    waiter.finish(.invalidated)
                }
                guard waiter.start(continuation, watching: [writable, invalidated]) else { return }
                let loop = AsyncHost.thread.runLoop
                loop.add(writable, forMode: .default)
                loop.add(invalidated, forMode: .default)
            }
        } onCancel: {
            waiter.finish(.cancelled)
        }
    }

    /// One suspended sender: resumed once, by whichever of its sources or its cancellation
    /// comes first; the sources are invalidated then.
    private final class Waiter: Sendable {
        private struct State {
            var continuation: UnsafeContinuation<SenderWake, Never>?
            var sources: [FileDescriptorSource] = []
            /// A result that came before the continuation (a cancellation racing the start).
            var early: SenderWake?
            var done = false
        }
        private let state = Locked(State())

        /// Installs the continuation; false (and resumed at once) when a result came first.
        func start(_ continuation: UnsafeContinuation<SenderWake, Never>, watching sources: [FileDescriptorSource]) -> Bool {
            let early: SenderWake? = state.withLock { state in
                if let early = state.early { return early }
                state.continuation = continuation
                state.sources = sources
                return nil
            }
            guard let early else { return true }
            continuation.resume(returning: early)
            return false
        }

        func finish(_ wake: SenderWake) {
            let (continuation, sources): (UnsafeContinuation<SenderWake, Never>?, [FileDescriptorSource]) = state.withLock { state in
                guard !state.done else { return (nil, []) }
                guard let continuation = state.continuation else {
                    state.early = state.early ?? wake
                    return (nil, [])
                }
                state.done = true
                state.continuation = nil
                defer { state.sources = [] }
                return (continuation, state.sources)
            }
            for source in sources { source.invalidate() }
            continuation?.resume(returning: wake)
        }
    }
}

extension MessagePort {
    /// The async `send` through a proxy: writes at once when the peer's buffer has room, else
    /// suspends on the `AsyncHost` loop until it has, and tries again.
    func sendRemoteSuspending(msgid: UInt32, payload: Message.Payload, replyPort: MessagePort?,
                              metadata: MessageMetadata?) async throws(PortError) {
        if let conduit {
            try await sendThroughConduit(conduit, Message(msgid: msgid, payload: payload, replyPort: replyPort,
                                                          metadata: metadata))
            return
        }
        var suspended = false
        while true {
            do {
                // A deadline already passed: a full buffer reports `.timedOut` instead of waiting.
                try sendRemote(msgid: msgid, payload: payload, replyPort: replyPort, metadata: metadata,
                               countsBlocked: false, deadline: { .now })
                return
            } catch .timedOut {
                guard !Task.isCancelled else { throw .cancelled }
            }
            if !suspended { proxyCounters?.sendersBlocked.add(1, ordering: .relaxed) }
            suspended = true
            guard let remote else { throw .invalidPort }
            switch await ProxyWritability.wait(for: remote, bell: try invalidationBell()) {
            case .room: continue
            case .invalidated: throw .invalidPort
            case .cancelled: throw .cancelled
            }
        }
    }
}

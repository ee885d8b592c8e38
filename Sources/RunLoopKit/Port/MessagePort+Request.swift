import Synchronization

/// Request/reply (§3.28, §3.50): CFMessagePortSendRequest on Linux. Each request gets a
/// private reply port used once — a send-once right: the first send to it consumes the right,
/// so any later send throws `.invalidPort`, even one made before the first reply was delivered.
extension MessagePort {
    /// Sends a request with a private one-shot reply port as `from:` and returns the first
    /// message sent to that port, running the calling thread's loop in `replyMode` meanwhile
    /// (CF's semantics: only items of `replyMode` run; a private mode name gives a loop that
    /// services nothing but the reply).
    ///
    /// Throws `.timedOut` when the request could not be queued within `timeout`,
    /// `.replyTimedOut` when no reply came within `timeout` of the call, `.invalidPort` when this
    /// port is or becomes invalid while waiting (its owner invalidated it, or its process died
    /// — noticed at once, not at the timeout), plus `send`'s other errors. Works on local ports,
    /// send-right proxies and `connect(to:)` proxies alike.
    ///
    /// On the calling thread's loop, which it runs (so a nested call from a handler works).
    /// Costs an eventfd for the reply port and, to a proxy, a socketpair for its send right,
    /// plus a handful of epoll_ctl calls.
    public func sendRequest(msgid: UInt32, components: [Message.Component] = [],
                            timeout: Duration, replyMode: ThreadRunLoop.Mode) throws(PortError) -> Message {
        let deadline = ContinuousClock.now + timeout
        let loop = ThreadRunLoop.current
        let request = PendingRequest()
        // Wakes the run below when the outcome comes from outside the mode's items (the
        // destination died on another thread): a performed Source0 ends the run.
        let wake = RunLoopSource {}
        loop.add(wake, forMode: replyMode)
        let setup = try RequestSetup(destination: self, request: request, loop: loop, mode: replyMode) {
            wake.signal()
            loop.wakeUp()
        }
        defer {
            setup.tearDown()
            wake.invalidate()
        }
        try send(msgid: msgid, components: components, from: setup.reply, before: deadline)

        var consumedStop = false
        while request.result == nil {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { break }
            switch loop.run(mode: replyMode, for: left, returnAfterSourceHandled: true) {
            case .stopped: consumedStop = true
            case .finished, .timedOut, .handledSource: break
            }
        }
        // A stop meant for an outer invocation must reach it (§3.6: a stop is never lost).
        if consumedStop { loop.stop() }
        return try (request.result ?? .failure(.replyTimedOut)).get()
    }

    /// The async form: the calling task suspends (no thread blocks) until the reply, the
    /// timeout (`.replyTimedOut`), this port's death (`.invalidPort`) or the task's
    /// cancellation (``PortError/cancelled`` before the request was queued,
    /// ``PortError/requestCancelled`` after: the destination may handle it). The reply port is received by a resident thread shared by
    /// all async requests of the process. Errors as the synchronous form. Any task.
    public func sendRequest(msgid: UInt32, components: [Message.Component] = [],
                            timeout: Duration) async throws(PortError) -> Message {
        let deadline = ContinuousClock.now + timeout
        let request = PendingRequest()
        let host = AsyncHost.thread.runLoop
        let setup = try RequestSetup(destination: self, request: request, loop: host, mode: .default) {}
        defer { setup.tearDown() }
        // At the deadline, a request still waiting for room could not be queued in time (§3.28's
        // `.timedOut`, as the synchronous form reports); a queued one had no reply.
        let timer = RunLoopTimer(fireAt: deadline) { _ in
            request.complete(.failure(request.isQueued ? .replyTimedOut : .timedOut))
        }
        host.add(timer, forMode: .default)
        defer { timer.invalidate() }

        let result: Result<Message, PortError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                request.onCompletion { continuation.resume(returning: $0) }
                guard request.result == nil else { return }
                // The common case queues at once; a full queue blocks a thread of our own, never
                // one of the concurrency pool, until there is room or the deadline.
                switch attemptSend(msgid: msgid, components: components, from: setup.reply, before: .now) {
                case nil:
                    request.markQueued()
                case .timedOut? where ContinuousClock.now < deadline:
                    let reply = setup.reply
                    // The thread has none of the task's locals: the request carries the task's
                    // trace context all the same.
                    let metadata = MessageContext.metadataForSend()
                    do throws(Errno) {
                        try KernelThread(name: "RLK request send") {
                            if let error = MessageContext.withContext(of: metadata, {
                                self.attemptSend(msgid: msgid, components: components, from: reply, before: deadline)
                            }) {
                                request.complete(.failure(error))
                            } else {
                                request.markQueued()
                            }
                        }.detach()
                    } catch {
                        request.complete(.failure(.resourceExhausted(errno: error.rawValue)))
                    }
                case let error?:
                    request.complete(.failure(error))
                }
            }
        } onCancel: {
            // Whether the request reached the destination decides what a retry would do (§3.28).
            request.complete(.failure(request.isQueued ? .requestCancelled : .cancelled))
        }
        return try result.get()
    }
}

extension MessagePort {
    /// `send`, with its error as a value.
    fileprivate func attemptSend(msgid: UInt32, components: [Message.Component], from reply: MessagePort,
                                 before deadline: ContinuousClock.Instant) -> PortError? {
        do throws(PortError) {
            try send(msgid: msgid, components: components, from: reply, before: deadline)
            return nil
        } catch {
            return error
        }
    }
}

/// What a request waits for: the first of reply, failure, timeout or cancellation.
final class PendingRequest: Sendable {
    private struct State {
        var result: Result<MessagePort.Message, PortError>?
        var queued = false
        var onCompletion: (@Sendable (Result<MessagePort.Message, PortError>) -> Void)?
    }
    private let state = Mutex(State())

    var result: Result<MessagePort.Message, PortError>? { state.withLock { $0.result } }

    /// Whether the request reached the destination's queue (or socket): a timeout after that
    /// is the reply's, before it the request's own.
    var isQueued: Bool { state.withLock { $0.queued } }

    func markQueued() {
        state.withLock { $0.queued = true }
    }

    /// Records the outcome unless one is recorded already; the first one wins.
    func complete(_ result: Result<MessagePort.Message, PortError>) {
        let callback: (@Sendable (Result<MessagePort.Message, PortError>) -> Void)? = state.withLock { state in
            guard state.result == nil else { return nil }
            state.result = result
            defer { state.onCompletion = nil }
            return state.onCompletion
        }
        callback?(result)
    }

    /// Calls `body` once with the outcome: now if it is known, else when it is.
    func onCompletion(_ body: @escaping @Sendable (Result<MessagePort.Message, PortError>) -> Void) {
        let known: Result<MessagePort.Message, PortError>? = state.withLock { state in
            if state.result == nil { state.onCompletion = body }
            return state.result
        }
        if let known { body(known) }
    }
}

/// The reply port and the watch on the destination, set up before the request is sent and
/// torn down after the outcome.
private struct RequestSetup {
    let reply: MessagePort
    let destination: MessagePort
    let watcher: UInt64
    let hangUp: FileDescriptorSource?
    /// The descriptor `hangUp` watches: a duplicate of the proxy's socket, so that it is a
    /// registration of its own even where the proxy itself is registered in the same mode.
    let watched: FileDescriptor?

    init(destination: MessagePort, request: PendingRequest, loop: ThreadRunLoop, mode: ThreadRunLoop.Mode,
         wake: @escaping @Sendable () -> Void) throws(PortError) {
        let reply = try MessagePort(queueLimit: 1)
        reply.makeSendOnce()
        self.reply = reply
        self.destination = destination
        // Send-once: the first message is the reply; the port dies with it, so later sends fail.
        reply.setHandler { [weak reply] message in
            reply?.invalidate()
            request.complete(.success(message))
        }
        loop.add(reply, forMode: mode)

        let watcher = Source1Token.next()
        self.watcher = watcher
        let watching: Bool = destination.lock.withLock {
            guard destination.membership.isValid else { return false }
            destination.state.invalidationWatchers[watcher] = {
                request.complete(.failure(.invalidPort))
                wake()
            }
            return true
        }
        // A proxy learns that its owner is gone from a hang-up on its socket, which nothing may
        // be watching: watch it here, in the mode being run.
        if watching, let remote = destination.remote, let copy = try? remote.duplicate(inheritable: false) {
            // Readable means hung up: the owner never writes to a send right.
            let source = FileDescriptorSource(fileDescriptor: copy.rawValue, events: .readable) {
                [weak destination] source, _ in
                source.invalidate()
                destination?.invalidate()
            }
            loop.add(source, forMode: mode)
            hangUp = source
            watched = copy
        } else {
            hangUp = nil
            watched = nil
        }
        if !watching {
            reply.invalidate()
            reply.setHandler(nil)
            throw .invalidPort
        }
    }

    func tearDown() {
        hangUp?.invalidate()
        watched?.close()
        destination.lock.withLock { _ = destination.state.invalidationWatchers.removeValue(forKey: watcher) }
        reply.invalidate()
        reply.setHandler(nil)
    }
}

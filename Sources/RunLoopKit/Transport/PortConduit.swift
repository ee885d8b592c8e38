/// Where a proxy that is not a send right sends its messages: a transport other than the
/// socketpair, such as RunLoopKitGRPC's bridge to a port on another host. Package-internal: a
/// conduit is made by a bridge target of this package, never by users.
///
/// `MessagePort.send` and its async form hand each message to the conduit on the sending
/// thread or task. A conduit reporting `.invalidPort` says the port behind it is gone: the
/// proxy is invalidated then, as a send right's proxy is on EPIPE.
package protocol PortConduit: AnyObject, Sendable {
    /// Sends `message`, waiting until `deadline` (nil: the caller gave none) while the
    /// transport has no room; `.timedOut` when it stays full.
    func send(_ message: MessagePort.Message, before deadline: ContinuousClock.Instant?) throws(PortError)
    /// Sends `message`, suspending while the transport has no room; `.cancelled` when the
    /// task is cancelled while it waits.
    func send(_ message: MessagePort.Message) async throws(PortError)
    /// The proxy was invalidated (by its user or by a failed send): senders waiting for room
    /// must give up with `.invalidPort`.
    func proxyInvalidated()
}

extension MessagePort {
    /// A proxy that sends through `conduit`. Any thread; free.
    package convenience init(conduit: any PortConduit) {
        self.init(proxyFor: nil, conduit: conduit)
    }

    /// `send` through the conduit; `.invalidPort` from it is the dead-name notice.
    func sendThroughConduit(_ conduit: any PortConduit, _ message: Message,
                            deadline: () -> ContinuousClock.Instant?) throws(PortError) {
        guard isValid else { throw .invalidPort }
        do {
            try conduit.send(message, before: deadline())
        } catch {
            if error == .invalidPort { invalidate() }
            throw error
        }
    }

    /// The async `send` through the conduit.
    func sendThroughConduit(_ conduit: any PortConduit, _ message: Message) async throws(PortError) {
        guard isValid else { throw .invalidPort }
        do {
            try await conduit.send(message)
        } catch {
            if error == .invalidPort { invalidate() }
            throw error
        }
    }

    /// Queues a message built by a bridge (carrying its peer's identity in `origin`) on this
    /// local port, as the synchronous `send` does. Any thread.
    package func enqueue(_ message: Message, before deadline: ContinuousClock.Instant) throws(PortError) {
        precondition(!isProxy, "MessagePort.enqueue is for local ports, not proxies")
        if membership.isValid, case .success(let position) = inbox.claim() {
            inbox.slot(at: position).initialize(to: message)
            publish(position)
        } else {
            try enqueueWaiting(message, deadline: { deadline })
        }
    }

    /// Queues a bridge's message on this local port, as the async `send` does: suspends while
    /// the queue is full. Any task.
    package func enqueue(_ message: Message) async throws(PortError) {
        precondition(!isProxy, "MessagePort.enqueue is for local ports, not proxies")
        if membership.isValid, case .success(let position) = inbox.claim() {
            inbox.slot(at: position).initialize(to: message)
            publish(position)
        } else {
            try await enqueueSuspending(message)
        }
    }
}

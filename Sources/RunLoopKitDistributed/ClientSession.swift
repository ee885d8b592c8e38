import FoundationEssentials
import RunLoopKit

/// A caller's session with the system that publishes one name (distributed-envelope.md §2): a
/// reply port of its own, whose send right only that system holds, and a proxy for the session
/// port that system made for it. Both are on the caller's system's loop: the proxy's hang-up
/// (the callee's process died, or it closed the session) fails the session's calls at once with
/// `.peerTerminated`. Opened by the first call to the name; the calls made meanwhile wait for it.
final class ClientSession: Sendable {
    struct Link: Sendable {
        /// A proxy for the callee's session port: CALLs go here.
        let calls: MessagePort
        /// This session's reply port: RETURN, THROW and FAILURE come here.
        let replies: MessagePort
    }

    private enum Phase {
        case opening(Task<Link, any Error>?)
        case open(Link)
        case closed(any Error)
    }

    let key: SessionKey
    private let phase = Locked(Phase.opening(nil))
    private let calls: PendingCalls
    private let loop: ThreadRunLoop
    private weak let system: PortActorSystem?
    /// The callee's process, as the kernel reported it with the WELCOME: later replies must come
    /// from it. Set once, on the loop thread, before any other reply is read.
    private let server = Locked<MessagePort.Sender??>(nil)

    /// A session that starts opening at once (on a task of its own).
    init(key: SessionKey, system: PortActorSystem) {
        self.key = key
        self.system = system
        calls = system.calls
        loop = system.loop
        let opening = Task { [self] in try await open(timeout: system.callTimeout) }
        phase.withLock { phase in
            if case .opening = phase { phase = .opening(opening) }
        }
    }

    /// The open session's ports, once it is open. Throws why it could not be opened, or why it
    /// closed. Any task; a lock when it is open.
    func link() async throws -> Link {
        let now = phase.withLock { $0 }
        switch now {
        case .open(let link): return link
        case .closed(let error): throw error
        case .opening(let task?): return try await task.value
        case .opening(nil): preconditionFailure("a session's opening task is set when it is made")
        }
    }

    /// Closes the session for `error` (unless it is closed already) and returns the error it
    /// closed for: its calls fail with it, and the next call to the name opens a new session.
    /// Any thread.
    @discardableResult
    func closed(by error: any Error) -> any Error {
        let (first, link): (Bool, Link?) = phase.withLock { phase in
            switch phase {
            case .closed: return (false, nil)
            case .open(let link):
                phase = .closed(error)
                return (true, link)
            case .opening:
                phase = .closed(error)
                return (true, nil)
            }
        }
        guard first else { return phase.withLock { phase in if case .closed(let earlier) = phase { earlier } else { error } } }
        if let link {
            link.calls.setInvalidationHandler(nil)
            link.calls.invalidate()
            link.replies.invalidate()
        }
        calls.fail(session: ObjectIdentifier(self), with: error)
        system?.sessionClosed(self)
        return error
    }

    // MARK: - Opening

    /// Connects to the name (on a thread of its own: `connect(to:)` blocks for the owner's
    /// answer), sends HELLO with a new reply port and waits for the WELCOME and its session port.
    private func open(timeout: Duration) async throws -> Link {
        let key = key
        let connected: Result<MessagePort, PortError> = await onOwnThread("PortActorSystem connect") {
            do throws(PortError) {
                if let publisher = key.publisher { return .success(try MessagePort.connect(to: key.name, publishedBy: publisher)) }
                return .success(try MessagePort.connect(to: key.name))
            } catch {
                return .failure(error)
            }
        }
        let entrance: MessagePort
        switch connected {
        case .success(let port): entrance = port
        case .failure(.nameNotFound): throw failedToOpen(PortActorSystemError.actorNotFound(key.description))
        case .failure(let error): throw failedToOpen(error)
        }
        defer { entrance.invalidate() }

        let replies: MessagePort
        do { replies = try MessagePort() } catch { throw failedToOpen(error) }
        replies.setHandler { [weak self] message in self?.received(message) }
        loop.add(replies, forMode: .common)
        // While it waits for the WELCOME, the entrance's hang-up says the publisher went away.
        let hello = calls.register(session: ObjectIdentifier(self), deadline: .now + timeout)
        entrance.setInvalidationHandler { [calls] _ in calls.complete(hello, with: .failure(PortActorSystemError.peerTerminated)) }
        loop.add(entrance, forMode: .common)

        let welcome: MessagePort.Message
        do {
            try await entrance.send(msgid: 0, components: [.data(try Envelope.hello(callID: hello).encoded())], from: replies)
            welcome = try await calls.outcome(of: hello)
        } catch {
            calls.discard(hello)
            replies.invalidate()
            throw failedToOpen(error as? PortError == .invalidPort ? PortActorSystemError.peerTerminated : error)
        }
        entrance.setInvalidationHandler(nil)
        guard let sessionPort = welcome.port(at: 1) else {
            replies.invalidate()
            // Not a WELCOME: a FAILURE saying why (the received handler let nothing else through).
            do { try system?.checkVoidResult(of: welcome) } catch { throw failedToOpen(error) }
            throw failedToOpen(PortActorSystemError.remoteCallFailed("the callee answered HELLO without a session port"))
        }
        let link = Link(calls: sessionPort, replies: replies)
        let opened: Bool = phase.withLock { phase in
            guard case .opening = phase else { return false }
            phase = .open(link)
            return true
        }
        guard opened else {
            sessionPort.invalidate()
            replies.invalidate()
            throw phase.withLock { phase in if case .closed(let error) = phase { error } else { PortError.invalidPort } }
        }
        // The session port's hang-up is the callee's death (or its closing the session); set
        // after the session is open, so it closes an open session.
        sessionPort.setInvalidationHandler { [weak self] _ in self?.closed(by: PortActorSystemError.peerTerminated) }
        loop.add(sessionPort, forMode: .common)
        return link
    }

    /// The session could not be opened: it closes, so the next call tries afresh.
    private func failedToOpen(_ error: any Error) -> any Error {
        closed(by: error)
    }

    // MARK: - Replies (the system's loop thread)

    /// A message on the reply port: a WELCOME (with the session port) or FAILURE answering the
    /// HELLO, then RETURN, THROW or FAILURE answering CALLs. Anything else, or a message from
    /// another process than the WELCOME's, closes the session: its calls fail with
    /// `.remoteCallFailed`.
    private func received(_ message: MessagePort.Message) {
        guard message.replyPort == nil, let data = message.data(at: 0), message.data(at: 1) == nil,
              case .success(let view) = EnvelopeView.of(data) else {
            return refuse("a reply that is not one envelope")
        }
        let accepted: Bool = server.withLock { server in
            guard let expected = server else {
                server = .some(message.sender)
                return true
            }
            return expected == message.sender
        }
        guard accepted else { return refuse("a reply from another process than the session's") }
        switch view.kind {
        case .welcome:
            guard message.port(at: 1) != nil else { return refuse("a WELCOME without its session port") }
        case .returned, .threw, .failed:
            guard message.port(at: 1) == nil else { return refuse("a reply with a port") }
        case .hello, .call:
            return refuse("a \(view.kind) on a reply port")
        }
        // A reply to no waiting call of this session is late (its call timed out): dropped.
        calls.complete(view.callID, of: ObjectIdentifier(self), with: .success(message))
    }

    private func refuse(_ what: String) {
        closed(by: PortActorSystemError.remoteCallFailed("the callee's system sent \(what); its session was closed"))
    }
}

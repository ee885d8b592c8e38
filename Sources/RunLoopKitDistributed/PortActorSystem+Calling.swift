import Distributed
import FoundationEssentials
import RunLoopKit

/// The caller's side of a remote call: the session with the callee's system, the CALL sent on
/// it, and the reply turned back into a result or an error.
extension PortActorSystem {
    /// Sends the recorded call to the actor `id` names and waits for the reply's message.
    func exchange(_ invocation: inout PortInvocationEncoder, target: RemoteCallTarget,
                  with id: PortActorID) async throws -> MessagePort.Message {
        let session = try clientSession(for: id)
        let link = try await session.link()
        let deadline = ContinuousClock.now + callTimeout
        let callID = calls.register(session: ObjectIdentifier(session), deadline: deadline)
        do {
            let envelope = try invocation.envelope(callID: callID, target: target)
            try await link.calls.send(msgid: 0, components: [.data(envelope)])
        } catch {
            calls.discard(callID)
            // The session's port is gone: its process died or the session was closed.
            if error == .invalidPort { throw session.closed(by: PortActorSystemError.peerTerminated) }
            throw error
        }
        return try await calls.outcome(of: callID)
    }

    /// The session with whoever publishes `id`'s name, opened now if there is none. Throws
    /// `.actorNotFound` for an assigned identity, `PortError.invalidPort` after `shutdown()`.
    func clientSession(for id: PortActorID) throws -> ClientSession {
        guard case .named(let name, let publisher) = id.kind else {
            throw PortActorSystemError.actorNotFound(id.description)
        }
        let key = SessionKey(name: name, publisher: publisher)
        return try state.withLock { state throws(PortError) -> ClientSession in
            guard !state.isShutDown else { throw .invalidPort }
            if let session = state.sessions[key] { return session }
            let session = ClientSession(key: key, system: self)
            state.sessions[key] = session
            return session
        }
    }

    /// Forgets a session that closed, so that the next call opens a new one.
    func sessionClosed(_ session: ClientSession) {
        state.withLock { state in
            if state.sessions[session.key] === session { state.sessions[session.key] = nil }
        }
    }

    /// The result a RETURN carries, or the error a THROW or FAILURE says about the call of
    /// `target`. The calling task.
    func result<Res: Codable>(of reply: MessagePort.Message, as type: Res.Type, target: RemoteCallTarget) throws -> Res {
        let (data, view) = try Self.envelope(of: reply)
        guard view.kind == .returned else { throw error(in: data, view, target: target) }
        do {
            return try coding.decode(Res.self, from: data, view.value, system: self)
        } catch {
            throw PortActorSystemError.remoteCallFailed("the result does not decode as \(Res.self): \(error)")
        }
    }

    /// Nothing for an empty RETURN; the error a THROW or FAILURE says about the call of
    /// `target` (nil for a HELLO). The calling task.
    func checkVoidResult(of reply: MessagePort.Message, target: RemoteCallTarget? = nil) throws {
        let (data, view) = try Self.envelope(of: reply)
        guard view.kind == .returned else { throw error(in: data, view, target: target) }
    }

    /// A reply's envelope, validated again on the calling task (the loop checked it already).
    private static func envelope(of reply: MessagePort.Message) throws -> (Data, EnvelopeView) {
        guard let data = reply.data(at: 0), case .success(let view) = EnvelopeView.of(data) else {
            throw PortActorSystemError.remoteCallFailed("the reply is not an envelope")
        }
        return (data, view)
    }

    /// The error a THROW (the callee's own, decoded) or a FAILURE reply stands for.
    /// An unknown target is named as this process called it (its readable form): the FAILURE
    /// carries the identifier as the callee received it.
    private func error(in data: Data, _ view: EnvelopeView, target: RemoteCallTarget?) -> any Error {
        let text = data.withUnsafeBytes { String(decoding: $0[view.value], as: UTF8.self) }
        switch (view.kind, view.reason) {
        case (.failed, .actorNotFound?): return PortActorSystemError.actorNotFound(text)
        case (.failed, .unknownTarget?): return PortActorSystemError.unknownTarget(target?.description ?? text)
        case (.failed, _): return PortActorSystemError.remoteCallFailed(text)
        case (.threw, _):
            let name = data.withUnsafeBytes { String(decoding: $0[view.errorType], as: UTF8.self) }
            guard let type = _typeByName(name) as? any (Error & Decodable).Type else {
                return PortActorSystemError.remoteCallFailed("\(name) (not a Codable error type of this process): \(text)")
            }
            func decode<E: Error & Decodable>(_: E.Type) -> any Error {
                do {
                    return try coding.decode(E.self, from: data, view.value, system: self)
                } catch {
                    return PortActorSystemError.remoteCallFailed("\(E.self) does not decode: \(error); \(text)")
                }
            }
            return decode(type)
        default:
            return PortActorSystemError.remoteCallFailed("a reply of kind \(view.kind) to a call")
        }
    }
}

/// Whose sessions are whose: a name, in the caller's scope then the system's (nil) or in one
/// user's.
struct SessionKey: Hashable, Sendable, CustomStringConvertible {
    let name: String
    let publisher: UInt32?

    var description: String { PortActorID.named(name, publishedBy: publisher).description }
}

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// One caller's session with a published actor (distributed-envelope.md §2): a port of its own,
/// whose send right only that caller was given (in the WELCOME), and a proxy for the caller's
/// reply port. Both are on the publication's home loop. CALLs must come from the process that
/// sent the HELLO (kernel-verified, so the access policy decided at HELLO holds for every call):
/// a frame from anyone else, or one that is not a CALL envelope, closes the session — the peer
/// loses its connection, nothing else. The caller's hang-up (its process died, or it closed the
/// session) closes it too.
final class ServerSession: Sendable {
    let port: MessagePort
    let reply: MessagePort
    let peer: MessagePort.Sender?
    /// The uid sessions are counted under (this process's for a caller in this process).
    let peerUID: UInt32
    private let publication: Publication

    init(publication: Publication, reply: MessagePort, peer: MessagePort.Sender?) throws(PortError) {
        port = try MessagePort()
        self.reply = reply
        self.peer = peer
        peerUID = peer?.uid ?? geteuid()
        self.publication = publication
    }

    /// Puts both ports on the home loop and sends the WELCOME answering HELLO `callID`. False
    /// when the caller is gone or its reply port is full (the caller closes the session then).
    /// The home loop's thread.
    func start(welcoming callID: UInt64) -> Bool {
        port.setHandler { [weak self] message in self?.received(message) }
        publication.home.add(port, forMode: .common)
        reply.setInvalidationHandler { [weak self] _ in self?.close() }
        publication.home.add(reply, forMode: .common)
        guard let welcome = try? Envelope.welcome(callID: callID).encoded() else { return false }
        do {
            try reply.send(msgid: 0, components: [.data(welcome), .port(port)], before: .now)
            return true
        } catch {
            return false
        }
    }

    /// Invalidates both ports: the caller sees its session port hang up. Idempotent. Any thread.
    func close() {
        reply.setInvalidationHandler(nil)
        port.invalidate()
        reply.invalidate()
        publication.sessionClosed(self)
    }

    /// A message on the session's port (the home loop's thread).
    private func received(_ message: MessagePort.Message) {
        guard message.sender == peer else {
            return refuse("a frame from \(message.sender.map(String.init(describing:)) ?? "this process") on the session of \(peer.map(String.init(describing:)) ?? "this process")")
        }
        guard message.replyPort == nil, let data = message.data(at: 0), message.data(at: 1) == nil,
              message.port(at: 1) == nil else {
            return refuse("a message that is not one envelope")
        }
        let view: EnvelopeView
        switch EnvelopeView.of(data) {
        case .success(let valid): view = valid
        case .failure(let error): return refuse("a malformed envelope (\(error.rawValue))")
        }
        guard view.kind == .call else { return refuse("a \(view.kind) where a CALL belongs") }
        publication.execute(data, view, from: message.sender, reply: reply)
    }

    private func refuse(_ what: String) {
        publication.report("closed a session of \(publication.name): its caller sent \(what)")
        close()
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Distributed
import FoundationEssentials
import RunLoopKit

/// A published actor (distributed-envelope.md §2): the named port callers connect to, and the
/// sessions it opened for them. Its ports are on its home loop — the loop the actor is pinned
/// to, or else the system's — whose thread reads every CALL and starts the call's task.
final class Publication: Sendable {
    let name: String
    let actor: any DistributedActor
    /// The published port: HELLOs arrive here, under the publisher's access policy.
    let port: MessagePort
    let home: ThreadRunLoop
    /// The actor is pinned to `home`: its calls' tasks start there, so they reach it with no hop.
    let pinned: Bool
    let system: PortActorSystem
    private let sessions = Locked<[ObjectIdentifier: ServerSession]>([:])
    private let admitted = Locked<Set<String>>([])

    /// The most sessions one user may hold open with one publication: each holds two descriptors
    /// of the publisher's.
    static let sessionsPerUser = 256

    init(name: String, actor: any DistributedActor, port: MessagePort, pinnedTo loop: ThreadRunLoop?,
         system: PortActorSystem) {
        self.name = name
        self.actor = actor
        self.port = port
        home = loop ?? system.loop
        pinned = loop != nil
        self.system = system
    }

    /// Stops accepting sessions and closes the open ones: their callers' calls in flight fail
    /// with `.peerTerminated`, later ones with `.actorNotFound`. Any thread.
    func close() {
        port.invalidate()
        let open = sessions.withLock { sessions in
            defer { sessions = [:] }
            return Array(sessions.values)
        }
        for session in open { session.close() }
    }

    func sessionClosed(_ session: ServerSession) {
        _ = sessions.withLock { $0.removeValue(forKey: ObjectIdentifier(session)) }
    }

    // MARK: - HELLO (the home loop's thread)

    /// A message on the published port: a HELLO, with the caller's reply port, opens a session
    /// and is answered with a WELCOME carrying the session's port. Anything else is dropped,
    /// with its reply port. Answers are sent without waiting: a caller whose reply port is full
    /// gets no session, and the loop never blocks on it.
    func received(_ message: MessagePort.Message) {
        guard let reply = message.replyPort else {
            return report("dropped a message without a reply port on \(name)")
        }
        guard let data = message.data(at: 0), message.data(at: 1) == nil, message.port(at: 1) == nil,
              case .success(let view) = EnvelopeView.of(data), view.kind == .hello else {
            reply.invalidate()
            return report("dropped a message that is not a HELLO on \(name)")
        }
        let uid = message.sender?.uid ?? geteuid()
        let crowded = sessions.withLock { sessions in
            sessions.values.count { $0.peerUID == uid } >= Self.sessionsPerUser
        }
        if crowded {
            let failure = EnvelopeWriter.failure(callID: view.callID, reason: .remoteCallFailed,
                                                 text: "uid \(uid) holds \(Self.sessionsPerUser) sessions with \(name)")
            try? reply.send(msgid: 0, components: [.data(failure.data)], before: .now)
            reply.invalidate()
            return
        }
        let session: ServerSession
        do {
            session = try ServerSession(publication: self, reply: reply, peer: message.sender)
        } catch {
            reply.invalidate()
            return report("could not open a session on \(name): \(error)")
        }
        sessions.withLock { $0[ObjectIdentifier(session)] = session }
        guard port.isValid, session.start(welcoming: view.callID) else { return session.close() }
    }

    // MARK: - CALL (the home loop's thread)

    /// Starts the task that executes a validated CALL on the actor, as `sender`, answering on
    /// `reply`. A target that is not a distributed function of the actor's type is answered with
    /// FAILURE `unknownTarget` before anything runs.
    func execute(_ data: Data, _ view: EnvelopeView, from sender: MessagePort.Sender?, reply: MessagePort) {
        let identifier = data.withUnsafeBytes { String(decoding: $0[view.target], as: UTF8.self) }
        let handler = PortResultHandler(reply: reply, callID: view.callID, target: identifier, coding: system.coding)
        guard admits(identifier) else {
            Task { try await handler.onThrow(error: UnknownTarget()) }
            return
        }
        let decoder = PortInvocationDecoder(envelope: data, view: view, system: system)
        let operation: @Sendable () async -> Void = { [system, actor] in
            var decoder = decoder
            let target = RemoteCallTarget(identifier)
            await PortActorSystem.$currentCaller.withValue(sender) {
                // Within the caller's trace context (the CALL's message carried it, and the task
                // inherits it from the delivery): a server span named after the target, demangled
                // only when a tracer is installed, and only for an admitted target (§6).
                await MessageContext.withSpan(named: target.description, isClient: false) {
                    do {
                        try await system.executeDistributedTarget(on: actor, target: target,
                                                                  invocationDecoder: &decoder, handler: handler)
                    } catch {
                        try? await handler.onThrow(error: error)
                    }
                }
            }
        }
        if pinned {
            Task(executorPreference: home.executor, operation: operation)
        } else {
            Task(operation: operation)
        }
    }

    /// Whether `identifier` may run on the actor (`TargetCheck`), remembered for the targets
    /// admitted: at most as many as the actor's type has distributed functions.
    private func admits(_ identifier: String) -> Bool {
        if admitted.withLock({ $0.contains(identifier) }) { return true }
        guard TargetCheck.admits(identifier, on: actor) else { return false }
        admitted.withLock { _ = $0.insert(identifier) }
        return true
    }

    /// A line on stderr about a misbehaving caller (the port layer reports its own the same way).
    func report(_ what: String) {
        var line = Array("RunLoopKitDistributed: \(what)\n".utf8)
        _ = write(STDERR_FILENO, &line, line.count)
    }
}

/// A target refused before it ran: answered as the runtime's missing accessor is.
struct UnknownTarget: Error {}

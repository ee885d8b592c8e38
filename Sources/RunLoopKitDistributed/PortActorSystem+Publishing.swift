import Distributed
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// The callee's side: actors published under names, and the end of it all.
extension PortActorSystem {
    /// Makes `actor` callable from every process of this host that `access` admits, as `name`
    /// (1–100 bytes of `[A-Za-z0-9._-]`, scoped by this process's effective uid: Guarantees §3.25).
    /// The system holds the actor until `unpublish(name)` or `shutdown()`. Its calls run on its
    /// own executor; an actor pinned to a resident thread also has its ports on that thread's
    /// loop, which then reads its calls.
    ///
    /// Throws `.nameInUse` when a live port holds the name, `.invalidName`, `.invalidPort` after
    /// `shutdown()`, `.resourceExhausted`. Publishing a remote reference, or an actor of another
    /// system, is a precondition failure. Any thread; a port, a listening socket, a lock.
    public func publish<Act>(_ actor: Act, as name: String, access: MessagePort.Access = .sameUser) throws(PortError)
        where Act: DistributedActor, Act.ActorSystem == PortActorSystem {
        try publish(actor, as: name, access: access, listeningSocket: nil)
    }

    /// `publish(_:as:access:)` on a listening socket someone else bound — systemd socket
    /// activation passes one (`ListenSequentialPacket=@runloopkit/<uid>/<name>`, see
    /// RunLoopKitSystemd's `SocketActivation`), so that no other process can take the name
    /// before this one publishes it. The system takes ownership of the descriptor (it is
    /// closed when publishing fails). With nil, binds its own socket. Throws as
    /// `MessagePort.publish(as:access:limits:listeningSocket:)` too. Any thread.
    public func publish<Act>(_ actor: Act, as name: String, access: MessagePort.Access = .sameUser,
                             listeningSocket: Int32?) throws(PortError)
        where Act: DistributedActor, Act.ActorSystem == PortActorSystem {
        precondition(__isLocalActor(actor), """
            PortActorSystem.publish(_:as: "\(name)"): \(actor.id) is a reference to a remote actor; \
            only an actor of this process can be published
            """)
        precondition(actor.actorSystem === self, """
            PortActorSystem.publish(_:as: "\(name)"): \(actor.id) belongs to another PortActorSystem; \
            publish it with the system it was made with
            """)
        let port: MessagePort
        do {
            port = try MessagePort()
        } catch {
            if let listeningSocket { close(listeningSocket) }
            throw error
        }
        let publication = Publication(name: name, actor: actor, port: port,
                                      pinnedTo: LoopExecutor.runLoop(of: actor.unownedExecutor), system: self)
        port.setHandler { [weak publication] message in publication?.received(message) }
        publication.home.add(port, forMode: .common)
        do {
            try port.publish(as: name, access: access, listeningSocket: listeningSocket)
        } catch {
            port.invalidate()
            throw error
        }
        let accepted = state.withLock { state in
            guard !state.isShutDown else { return false }
            state.publications[name] = publication
            return true
        }
        guard accepted else {
            port.invalidate()
            throw .invalidPort
        }
    }

    /// Withdraws the actor published as `name` and lets go of it: the name is free at once,
    /// calls in flight through its sessions fail with `.peerTerminated` and later calls with
    /// `.actorNotFound`. A name this system did not publish is ignored. Any thread; a lock.
    public func unpublish(_ name: String) {
        let publication = state.withLock { $0.publications.removeValue(forKey: name) }
        publication?.close()
    }

    /// Unpublishes every actor, closes every session (calls waiting for replies throw
    /// `PortError.invalidPort`, as do calls made later) and stops the system's thread. Local
    /// actors stay usable as plain actors. Idempotent. Any thread but the system's own.
    public func shutdown() {
        let (publications, sessions): ([Publication], [ClientSession]) = state.withLock { state in
            state.isShutDown = true
            defer {
                state.publications = [:]
                state.sessions = [:]
            }
            return (Array(state.publications.values), Array(state.sessions.values))
        }
        for publication in publications { publication.close() }
        for session in sessions { session.closed(by: PortError.invalidPort) }
        calls.failAll(with: PortError.invalidPort)
        thread.stop()
    }
}

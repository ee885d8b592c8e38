#if canImport(Glibc)
import Glibc
#endif

/// Named ports (§3.25–27; Protocols/named-ports.md): `publish(as:)` makes a local
/// port reachable by name from other processes of this host that its `Access` admits, and
/// `connect(to:)` returns a proxy for it — CFMessagePortCreateLocal / CreateRemote on Linux.
extension MessagePort {
    /// Who may send to a published port, decided from kernel-verified credentials only, never
    /// anything the peer says: the effective uid and gid of the process that connected
    /// (SO_PEERCRED, recorded at connect(2)) and the real uid and gid the kernel reports with
    /// each frame (SCM_CREDENTIALS) must both be admitted. For most processes the two are the
    /// same; a setuid program is admitted by neither alone. Root is not exempt: only a policy
    /// that names uid 0 (or `.anyone`) admits it.
    public struct Access: Sendable, Equatable, CustomStringConvertible {
        enum Rule: Sendable, Equatable {
            case sameUser
            case anyone
            case users(Set<UInt32>)
            case groups(Set<UInt32>)
        }

        let rule: Rule

        /// Processes of the publisher's effective uid (resolved when `publish` runs).
        /// The default. Any thread; free.
        public static let sameUser = Access(rule: .sameUser)
        /// Every process of this host (of this network namespace, where the name lives). Any
        /// thread; free.
        public static let anyone = Access(rule: .anyone)
        /// Processes whose uid is one of `uids`. Any thread; copies the set.
        public static func users(_ uids: Set<UInt32>) -> Access { Access(rule: .users(uids)) }
        /// Processes whose gid is one of `gids` (the primary group the kernel reports
        /// with each frame; supplementary groups are not seen per frame, so they do not count). Any
        /// thread; copies the set.
        public static func groups(_ gids: Set<UInt32>) -> Access { Access(rule: .groups(gids)) }

        /// This policy with `.sameUser` made concrete for a publisher of effective uid `uid`.
        func resolved(publisherUID uid: UInt32) -> Access {
            rule == .sameUser ? .users([uid]) : self
        }

        /// Whether a frame sent by `sender` may be delivered (a resolved policy).
        func admits(_ sender: Sender) -> Bool {
            admits(Credentials(pid: sender.pid, uid: sender.uid, gid: sender.gid))
        }

        /// Whether a frame sent by `credentials` may be delivered (a resolved policy).
        func admits(_ credentials: Credentials) -> Bool {
            switch rule {
            case .sameUser: credentials.uid == geteuid()
            case .anyone: true
            case .users(let uids): uids.contains(credentials.uid)
            case .groups(let gids): gids.contains(credentials.gid)
            }
        }

        /// The policy's name (and ids), for logs. Any thread; allocates the string.
        public var description: String {
            switch rule {
            case .sameUser: "sameUser"
            case .anyone: "anyone"
            case .users(let uids): "users(\(uids.sorted()))"
            case .groups(let gids): "groups(\(gids.sorted()))"
            }
        }
    }

    /// The process that sent a message's frame, as the kernel reported it (SCM_CREDENTIALS):
    /// its pid and its real uid and gid at the time of the send (the HELLO's connector,
    /// `TransportReport.connector`, has the effective ids of SO_PEERCRED), and the process itself,
    /// pinned (`process`), where the kernel can name it.
    ///
    /// Two senders are equal when their pid, uid and gid are: compare `process` to tell apart
    /// two processes that had the same pid one after the other.
    public struct Sender: Sendable, Equatable, Hashable, CustomStringConvertible {
        /// The sending process's id. Any thread; free.
        public var pid: Int32
        /// The sending process's user id. Any thread; free.
        public var uid: UInt32
        /// The sending process's group id. Any thread; free.
        public var gid: UInt32
        /// The process, pinned when the frame was read; nil for a sender made with
        /// `init(pid:uid:gid:)` and where the kernel could not pin it.
        let pin: PinnedProcess?

        /// A sender with these ids (for comparisons in tests and policies); its `process` is nil.
        /// Free. Any thread.
        public init(pid: Int32, uid: UInt32, gid: UInt32) {
            self.init(Credentials(pid: pid, uid: uid, gid: gid), pin: nil)
        }

        /// The sender of a frame or handshake record the kernel reported with `credentials`.
        init(_ credentials: Credentials, pin: PinnedProcess?) {
            pid = credentials.pid
            uid = credentials.uid
            gid = credentials.gid
            self.pin = pin
        }

        /// This process's pid, read once: a process that forks without exec keeps its parent's
        /// value, which only makes a frame from the child's parent look like one of its own.
        static let thisProcess = getpid()

        /// The equality of the pid, uid and gid. Any thread; free.
        public static func == (lhs: Sender, rhs: Sender) -> Bool {
            lhs.pid == rhs.pid && lhs.uid == rhs.uid && lhs.gid == rhs.gid
        }

        /// Hashes the pid, uid and gid. Any thread; free.
        public func hash(into hasher: inout Hasher) {
            hasher.combine(pid)
            hasher.combine(uid)
            hasher.combine(gid)
        }

        /// The pid, uid and gid, for logs (the pinned process is not looked at). Any thread;
        /// allocates the string.
        public var description: String { "pid \(pid), uid \(uid), gid \(gid)" }
    }

    /// How long `connect(to:)` waits for room in the owner's backlog and for its answer: long
    /// enough for a socket-activated owner to start and accept the connection waiting for it.
    static let connectTimeout: Duration = .seconds(30)

    /// Makes this local port reachable by `name` from every process of this host that `access`
    /// admits (CFMessagePortCreateLocal). The name lives in the abstract AF_UNIX namespace under
    /// this process's effective uid (uid 0's scope is the system's), so no file is created and
    /// the name is free again the moment the port is invalidated or unpublished or this
    /// process dies. Connections are accepted by the port's run loop, in the port's modes.
    ///
    /// Throws `.invalidName` unless `name` is 1–100 bytes of `[A-Za-z0-9._-]`, `.nameInUse`
    /// when a live port holds it, `.invalidPort` when this port is invalid, and
    /// `.resourceExhausted` when out of descriptors. Publishing a proxy, or a port that is
    /// already published, is a precondition failure. Any thread; a socket, bind, listen and a
    /// timerfd, plus an epoll_ctl per mode when the port is on a loop.
    public func publish(as name: String, access: Access = .sameUser) throws(PortError) {
        try publish(as: name, access: access, limits: .default, listeningSocket: nil)
    }

    /// `publish(as:access:)` with limits on what one user may hold: a user with
    /// `limits.connectionsPerUser` open connections to the name gets `.tooManyConnections` from
    /// `connect(to:)` until one of them is closed. Errors and cost as `publish(as:access:)`.
    public func publish(as name: String, access: Access = .sameUser, limits: NameLimits) throws(PortError) {
        try publish(as: name, access: access, limits: limits, listeningSocket: nil)
    }

    /// `publish(as:access:)` on a listening socket someone else bound — systemd socket
    /// activation passes one (`ListenSequentialPacket=@runloopkit/<uid>/<name>`, see
    /// RunLoopKitSystemd's `SocketActivation`) — so clients could connect before this process
    /// started. The port takes ownership of the descriptor. With nil, binds its own socket.
    /// Throws `.notASendRight` unless it is a listening AF_UNIX SOCK_SEQPACKET socket bound to
    /// the name's address in some scope. Any thread.
    public func publish(as name: String, access: Access = .sameUser, limits: NameLimits = .default,
                        listeningSocket: Int32?) throws(PortError) {
        precondition(!isProxy, """
            MessagePort.publish(as: "\(name)") was called on a proxy (a send right to a port owned \
            elsewhere); only a local port can be published: publish the port in the process that owns it.
            """)
        let portName = try PortName(name)
        let publisher = geteuid()
        let listener: UnixListener
        do throws(Errno) {
            if let listeningSocket {
                listener = try UnixListener(adopting: FileDescriptor(rawValue: listeningSocket))
                guard let address = listener.abstractName, portName.scope(ofAddress: address) != nil else {
                    listener.close()
                    throw Errno(rawValue: EPROTOTYPE)
                }
            } else {
                listener = try UnixListener.listen(abstractName: portName.address(uid: publisher))
            }
        } catch {
            switch error.rawValue {
            case EADDRINUSE: throw .nameInUse(name)
            case EPROTOTYPE: throw .notASendRight
            default: throw Self.portError(error)
            }
        }
        let publication: NameListener
        do throws(Errno) {
            publication = try NameListener(port: self, name: portName, listener: listener,
                                           access: access.resolved(publisherUID: publisher), limits: limits)
        } catch {
            listener.close()
            throw Self.portError(error)
        }
        let accepted: Bool = lock.withLock {
            guard membership.isValid else { return false }
            precondition(state.publication == nil, """
                MessagePort.publish(as: "\(name)") on a port already published as \
                "\(state.publication!.name)": a port has one name; unpublish() it first.
                """)
            state.publication = publication
            return true
        }
        guard accepted else {
            publication.close()
            throw .invalidPort
        }
        if let loop = membership.loop {
            for registration in publication.registrations {
                loop.addRegistration(registration, for: self) { lock.withLock { state.publication === publication } }
            }
        }
    }

    /// Withdraws the name: it is free at once for any process to publish, and `connect(to:)`
    /// no longer finds this port. Connections already made stay open (they are send rights now)
    /// and keep the access policy. Idempotent; `invalidate()` does it too. Any thread.
    public func unpublish() {
        let publication: NameListener? = lock.withLock {
            defer { state.publication = nil }
            return state.publication
        }
        guard let publication else { return }
        publication.close(unregisteringFrom: membership.loop, for: self)
    }

    /// The name this port is published under, nil when it is not. Any thread; a lock.
    public var publishedName: String? { lock.withLock { state.publication?.name.text } }

    /// Open connections made through the name, by the uid of the process that connected. A lock.
    var namedConnectionsByUser: [UInt32: Int] { lock.withLock { state.connections?.namedByUser ?? [:] } }

    /// A proxy for the port published as `name` (CFMessagePortCreateRemote): a send right like
    /// any other, whose frames the owner delivers with `message.sender` set, as long as its
    /// access policy admits the sending process. Looks in this process's own scope (its
    /// effective uid), then in the system's (uid 0), and only trusts a listener that the kernel
    /// says belongs to that scope's uid, so another user cannot impersonate the service.
    ///
    /// Throws `.invalidName`, `.nameNotFound` (no live port holds the name), `.accessDenied`
    /// (the policy refuses this process), `.tooManyConnections` (this user holds as many
    /// connections to the name as the owner's `NameLimits` allow), `.handshakeTimedOut` (the
    /// owner did not answer within 30 s: its loop is not running, or is stuck), `.handshakeFailed`
    /// (it answered nonsense) or `.resourceExhausted`. Blocks the calling thread for one round
    /// trip with the owner's loop. Any thread; a socket, connect, one record each way.
    public static func connect(to name: String) throws(PortError) -> MessagePort {
        try connect(to: name, publishedBy: nil, timeout: connectTimeout)
    }

    /// A proxy for the port that the process of effective uid `uid` published as `name`: its
    /// scope only (a user's service that admits other users, or root asking for a user's
    /// port). Errors and cost as `connect(to:)`. Any thread.
    public static func connect(to name: String, publishedBy uid: UInt32) throws(PortError) -> MessagePort {
        try connect(to: name, publishedBy: .some(uid), timeout: connectTimeout)
    }

    /// `connect(to:)` (with `uid` nil) or `connect(to:publishedBy:)` that gives up once `timeout`
    /// has passed — waiting for room in the owner's backlog and for its answer to the handshake —
    /// with `.handshakeTimedOut`: the owner did not answer in time (its loop is not running, is
    /// stuck, or is not reading its name). Other errors and cost as `connect(to:)`. Any thread;
    /// blocks the calling thread at most `timeout` (a timeout of zero or less gives up at once
    /// unless the answer is already there).
    public static func connect(to name: String, publishedBy uid: UInt32? = nil, timeout: Duration) throws(PortError) -> MessagePort {
        let portName = try PortName(name)
        let deadline = ContinuousClock.now + timeout
        let own = geteuid()
        let scopes: [UInt32] = uid.map { [$0] } ?? (own == 0 ? [own] : [own, 0])
        for scope in scopes {
            if let port = try connect(to: portName, scope: scope, deadline: deadline) { return port }
        }
        throw .nameNotFound(name)
    }

    /// One scope's attempt; nil when the name is not (or not truly) published there.
    private static func connect(to name: PortName, scope uid: UInt32, deadline: ContinuousClock.Instant) throws(PortError) -> MessagePort? {
        let socket: SeqPacketSocket
        do {
            socket = try SeqPacketSocket.connect(toAbstractName: name.address(uid: uid), deadline: deadline)
        } catch {
            switch error.rawValue {
            case ECONNREFUSED, ENOENT: return nil
            case EAGAIN, ETIMEDOUT: throw .handshakeTimedOut
            default: throw portError(error)
            }
        }
        var handedOff = false
        defer { if !handedOff { socket.close() } }
        // Anyone can bind any abstract name: only a listener of the scope's own uid is the port.
        guard socket.peerCredentials?.uid == uid else { return nil }
        do {
            try socket.send(Handshake.hello(name: name.bytes).encode())
        } catch {
            return nil
        }
        guard socket.waitUntilReadable(deadline: deadline) else { throw .handshakeTimedOut }
        let received: (bytes: [UInt8], credentials: Credentials?, extras: Bool)?
        do { received = try socket.receiveSmallRecord(capacity: Handshake.maximumSize) } catch { return nil }
        guard let record = received else { throw .handshakeTimedOut }
        // End-of-stream: the owner went away, or dropped the connection unanswered.
        if record.bytes.isEmpty && !record.extras { return nil }
        if record.extras { throw .handshakeFailed(.unexpectedControlMessage) }
        let answer: Handshake
        do { answer = try Handshake.decode(record.bytes, expecting: .answer) } catch { throw .handshakeFailed(error) }
        switch answer {
        case .welcome:
            do { try socket.makeNonBlocking() } catch { throw portError(error) }
            handedOff = true
            return MessagePort(proxyFor: socket)
        case .denied:
            throw .accessDenied
        case .tooManyConnections:
            throw .tooManyConnections
        case .unknownName, .hello:
            return nil
        }
    }

    /// Called once by `invalidate()`: frees the name and tells the requests waiting on this port.
    func didInvalidate() {
        unpublish()
        let watchers: [@Sendable () -> Void] = lock.withLock {
            defer { state.invalidationWatchers = [:] }
            return Array(state.invalidationWatchers.values)
        }
        for watcher in watchers { watcher() }
    }
}

extension MessagePort.Message {
    /// The process that sent this message's frame — pid, real uid and gid as the kernel
    /// reported them with the frame (SCM_CREDENTIALS), not as the peer claims, and the process
    /// itself, pinned (`Sender.process`) — or nil for a message sent within this process to a
    /// local port. A frame that came through a socket always has a sender, also when this
    /// process sent it (through a send right to one of its own ports). Any thread; free.
    public var sender: MessagePort.Sender? { kernelSender }
}

extension MessagePort.Sender {
    /// The process that sent this frame, pinned at receipt: unlike `pid`, it never
    /// names another process, also after this one has exited and its pid was given to another.
    /// Compare it, signal it or watch it exit (`ProcessExitSource`) without the risk of reaching
    /// whoever holds the pid now.
    ///
    /// On a named connection the process that connected is the one the kernel recorded at
    /// connect(2) (SO_PEERPIDFD), which no one can forge; a frame from another holder of the
    /// connection names what its `SCM_CREDENTIALS` named, which only a privileged process — or
    /// one naming its own descendants from a user namespace it made, which the owner refuses
    /// (see the Security model article) — can choose.
    ///
    /// Nil where the kernel cannot pin the sender: before Linux 5.3 (no pidfd), when the
    /// kernel could not make a pidfd for it (this process out of descriptors, or the sender
    /// already reaped and its pid free when the frame was read). Nil for a sender made with
    /// `init(pid:uid:gid:)`.
    ///
    /// Any thread; free: the process was pinned when the frame was read (one poll(2) per frame
    /// from a process its connection knows, a pidfd for a frame from one it does not).
    public var process: PinnedProcess? { pin }
}

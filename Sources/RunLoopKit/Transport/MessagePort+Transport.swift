#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// The cross-process transport (DESIGN §4, Protocols/port-message-frame.md): send rights as
/// SOCK_SEQPACKET socket ends, proxies that write frames, and the owning side reading frames
/// into the same queue local senders use.
extension MessagePort {
    /// The largest frame (header, component table and data) the transport carries.
    public static let maximumFrameSize = PortFrame.maximumFrameSize

    /// Makes a send right for this port: one end of a new AF_UNIX SOCK_SEQPACKET socketpair,
    /// whose other end becomes a connection this port's loop reads. Hand it to another process
    /// by inheritance (`inheritable: true` clears close-on-exec) or inside a message. The caller
    /// owns the returned descriptor. For a proxy, returns a duplicate of its own send right.
    /// Throws `.resourceExhausted` when out of descriptors, `.invalidPort` when invalid.
    /// Any thread; a socketpair(2) and an epoll_ctl(2) (the first time, an epoll_create1(2) too).
    public func makeSendRight(inheritable: Bool = false) throws(PortError) -> Int32 {
        guard isValid else { throw .invalidPort }
        if let remote {
            do { return try remote.duplicate(inheritable: inheritable).rawValue } catch { throw Self.portError(error) }
        }
        return try makeConnection(inheritable: inheritable).descriptor.rawValue
    }

    /// A new socketpair whose first end joins this port's connections; returns the other end.
    private func makeConnection(inheritable: Bool) throws(PortError) -> SeqPacketSocket {
        let (mine, theirs): (SeqPacketSocket, SeqPacketSocket)
        do { (mine, theirs) = try SeqPacketSocket.makePair(inheritable: inheritable) } catch { throw Self.portError(error) }
        var created: PortConnections?
        let failure: PortError? = lock.withLock { () -> PortError? in
            guard membership.isValid else { return .invalidPort }
            do throws(Errno) {
                if state.connections == nil {
                    state.connections = try PortConnections()
                    created = state.connections
                }
                try state.connections!.add(mine)
                return nil
            } catch {
                return Self.portError(error)
            }
        }
        if let failure {
            mine.close()
            theirs.close()
            throw failure
        }
        if let created { membership.loop?.addRegistration(connectionsRegistration(created), for: self) }
        return theirs
    }

    /// The descriptor to put in a frame for this port: a proxy's own send right, or a local
    /// port's shared send right (made on first use). The caller does not own it.
    func transferableDescriptor() throws(PortError) -> Int32 {
        guard isValid else { throw .invalidPort }
        if let remote { return remote.descriptor.rawValue }
        if let shared = lock.withLock({ state.sharedSendRight }) { return shared.descriptor.rawValue }
        let made = try makeConnection(inheritable: false)
        let winner: SeqPacketSocket = lock.withLock {
            if let existing = state.sharedSendRight { return existing }
            state.sharedSendRight = made
            return made
        }
        if winner != made { made.close() }
        return winner.descriptor.rawValue
    }

    /// A proxy for a send right that came from elsewhere (inherited, or received by other
    /// means): `send` on it writes frames that the owning process delivers. Takes ownership of
    /// the descriptor. Throws `.notASendRight` unless it is an AF_UNIX SOCK_SEQPACKET socket.
    /// Any thread; two getsockopt(2) and two fcntl(2).
    public convenience init(sendRight descriptor: Int32) throws(PortError) {
        let socket: SeqPacketSocket
        do {
            socket = try SeqPacketSocket(adopting: FileDescriptor(rawValue: descriptor))
        } catch {
            throw .notASendRight
        }
        self.init(proxyFor: socket)
    }

    /// True for a proxy (a send right to a port owned elsewhere), false for a local port.
    /// Any thread; free.
    public var isProxy: Bool { remote != nil }

    /// Open connections of a local port: receive ends of send rights whose senders have not
    /// all closed. Any thread; a lock.
    public var connectionCount: Int { lock.withLock { state.connections?.sockets.count ?? 0 } }

    /// Sets a closure told about dropped connections (`.malformedFrame(reason)` for a frame
    /// that broke the protocol, `.resourceExhausted` when received descriptors could not be
    /// installed). It runs on the receiving loop's thread. Without one, a line goes to stderr.
    /// Any thread; a lock.
    public func setTransportErrorHandler(_ handler: (@Sendable (PortError) -> Void)?) {
        lock.withLock { state.transportErrorHandler = handler }
    }

    // MARK: - Sending through a proxy

    /// Writes `message` as one frame, built in place; waits in poll(2) while the peer's buffer is full.
    func sendRemote(_ message: Message, deadline: @autoclosure () -> ContinuousClock.Instant?) throws(PortError) {
        guard let remote, isValid else { throw .invalidPort }
        let size = try FrameWriter.size(of: message.components)
        // One descriptor per PORT component in table order, then the reply port (spec §3).
        var descriptors: [Int32] = []
        for case .port(let port) in message.components { descriptors.append(try port.transferableDescriptor()) }
        if let reply = message.replyPort { descriptors.append(try reply.transferableDescriptor()) }
        let sent = withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer in
            FrameWriter.write(msgid: message.msgid, hasReplyPort: message.replyPort != nil,
                              components: message.components, into: buffer)
            return Result { () throws(PortError) in
                try send(frame: UnsafeRawBufferPointer(buffer), descriptors: descriptors, through: remote, deadline: deadline())
            }
        }
        try sent.get()
    }

    private func send(frame: UnsafeRawBufferPointer, descriptors: [Int32], through remote: SeqPacketSocket,
                      deadline: @autoclosure () -> ContinuousClock.Instant?) throws(PortError) {
        var resolvedDeadline: ContinuousClock.Instant??
        while true {
            do {
                try remote.send(frame, descriptors: descriptors)
                return
            } catch {
                switch error.rawValue {
                case EAGAIN:
                    if resolvedDeadline == nil { resolvedDeadline = .some(deadline()) }
                    let bell = try invalidationBell()
                    guard remote.waitUntilWritable(deadline: resolvedDeadline!, interruptedBy: bell) else { throw .timedOut }
                    guard isValid else { throw .invalidPort }
                case EMSGSIZE:
                    throw .messageTooLarge(limit: Self.maximumFrameSize)
                case ENOBUFS, ENOMEM, ETOOMANYREFS:
                    throw .resourceExhausted(errno: error.rawValue)
                default:
                    // EPIPE, ECONNRESET, ENOTCONN: the owner is gone. This is the dead-name notice.
                    invalidate()
                    throw .invalidPort
                }
            }
        }
    }

    /// The proxy's invalidation bell, made on first use; `.invalidPort` once invalid (checked
    /// under the lock, so an invalidation either is seen here or rings the bell).
    private func invalidationBell() throws(PortError) -> EventFD {
        try lock.withLock { () throws(PortError) -> EventFD in
            guard membership.isValid else { throw .invalidPort }
            if let bell = state.invalidationBell { return bell }
            do throws(Errno) {
                let bell = try EventFD()
                state.invalidationBell = bell
                return bell
            } catch {
                throw Self.portError(error)
            }
        }
    }

    // MARK: - Receiving on the owner's loop

    /// The connection set's epoll edge: frames may be waiting.
    func connectionsBecameReadable() {
        lock.withLock {
            connectionsPending.store(true, ordering: .releasing)
            refreshDeliverableLocked()
        }
    }

    /// Reads waiting frames into the queue (while it has room and a receiver is set), then
    /// delivers up to `limit` messages. Loop thread only.
    func service(upTo limit: Int) -> Int {
        readConnections()
        return deliver(upTo: limit)
    }

    private func readConnections() {
        guard connectionsPending.load(ordering: .acquiring) else { return }
        // With one connection it is read directly, saving the epoll_wait that would find it.
        let (connections, only): (PortConnections?, SeqPacketSocket?) = lock.withLock {
            guard state.hasReceiver, membership.isValid, let connections = state.connections else { return (nil, nil) }
            return (connections, connections.sockets.count == 1 ? connections.sockets.first!.value : nil)
        }
        guard let connections else { return }
        var drained = true
        if let only {
            drained = readFrames(from: only, of: connections)
        } else {
            var ready: [Int32] = []
            let reported = (try? connections.set.wait(timeout: .zero) { ready.append(Int32(truncatingIfNeeded: $0.token)) }) ?? 0
            // A full event buffer may have left ready connections unreported: read again next pass.
            drained = reported < connections.set.capacity
            for descriptor in ready {
                guard let socket = lock.withLock({ connections.sockets[descriptor] }) else { continue }
                if !readFrames(from: socket, of: connections) {
                    drained = false
                    break
                }
            }
        }
        lock.withLock {
            connectionsPending.store(!drained, ordering: .releasing)
            refreshDeliverableLocked()
        }
    }

    /// Reads frames from one connection until none is left (true) or the queue is full (false),
    /// several per recvmmsg(2); a batch smaller than asked for means the connection is drained,
    /// so no extra read is spent learning that. A closed, failed or misbehaving connection is dropped.
    private func readFrames(from socket: SeqPacketSocket, of connections: PortConnections) -> Bool {
        let batch = connections.batch
        while true {
            let room = lock.withLock { membership.isValid ? queueLimit - state.queue.count : 0 }
            guard room > 0 else { return false }
            let asked = min(room, batch.capacity)
            let count: Int?
            do {
                count = try socket.receive(into: batch, upTo: asked)
            } catch {
                drop(socket, of: connections, reporting: nil)
                return true
            }
            guard let count else { return true }
            for index in 0..<count {
                let record = batch[index]
                // A zero-length record is the peer closing (or breaking the rule that frames are
                // never empty): either way the connection ends, and so does a malformed frame.
                // Records already received after it in this batch are discarded with it, their
                // descriptors closed, as the kernel does for those still queued.
                let failure: FrameError?
                if record.endOfStream {
                    failure = nil
                } else {
                    switch message(from: record) {
                    case .success(let message):
                        lock.withLock {
                            state.queue.append(message)
                            refreshDeliverableLocked()
                        }
                        continue
                    case .failure(let reason):
                        failure = reason
                    }
                }
                for later in index..<count { for descriptor in batch[later].descriptors { descriptor.close() } }
                drop(socket, of: connections, reporting: failure.map(PortError.malformedFrame))
                return true
            }
            if count < asked { return true }
        }
    }

    /// Decodes and validates one received record into a message whose port components are
    /// proxies. On failure nothing has taken ownership of the record's descriptors.
    private func message(from record: ReceiveBatch.Record) -> Result<Message, FrameError> {
        if record.truncated { return .failure(.truncated) }
        if record.descriptorsTruncated { return .failure(.descriptorsTruncated) }
        if record.unexpectedControl { return .failure(.unexpectedControlMessage) }
        let reader: FrameReader
        do {
            reader = try FrameReader(validating: record.bytes, descriptorCount: record.descriptors.count)
        } catch {
            return .failure(error)
        }
        var sockets: [SeqPacketSocket] = []
        for descriptor in record.descriptors {
            guard let socket = try? SeqPacketSocket(adopting: descriptor) else { return .failure(.descriptorNotAPort) }
            sockets.append(socket)
        }
        var proxies = sockets.map { MessagePort(proxyFor: $0) }.makeIterator()
        var components: [Message.Component] = []
        components.reserveCapacity(reader.componentCount)
        reader.forEachComponent { data in
            components.append(data.map { .data(Data($0)) } ?? .port(proxies.next()!))
        }
        return .success(Message(msgid: reader.msgid, components: components,
                                replyPort: reader.hasReplyPort ? proxies.next() : nil))
    }

    private func drop(_ socket: SeqPacketSocket, of connections: PortConnections, reporting error: PortError?) {
        let handler = lock.withLock {
            connections.drop(socket)
            return state.transportErrorHandler
        }
        guard let error else { return }
        if let handler {
            handler(error)
        } else {
            var line = Array("RunLoopKit: \(self) dropped a connection: \(error)\n".utf8)
            _ = write(STDERR_FILENO, &line, line.count)
        }
    }

    static func portError(_ error: Errno) -> PortError {
        error.isResourceExhaustion ? .resourceExhausted(errno: error.rawValue) : .invalidPort
    }
}

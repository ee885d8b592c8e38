#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// The cross-process transport (DESIGN §4, Protocols/port-message-frame.md): send rights as
/// SOCK_SEQPACKET socket ends, proxies that write frames, and the owning side reading frames
/// into the same queue local senders use.
extension MessagePort {
    /// The largest frame (header, component table and data) the transport carries. Any thread; free.
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
        guard conduit == nil else { throw .notTransferable }
        return try makeConnection(inheritable: inheritable).descriptor.rawValue
    }

    /// A new socketpair whose first end joins this port's connections; returns the other end.
    private func makeConnection(inheritable: Bool) throws(PortError) -> SeqPacketSocket {
        let (mine, theirs): (SeqPacketSocket, SeqPacketSocket)
        do { (mine, theirs) = try SeqPacketSocket.makePair(inheritable: inheritable) } catch { throw Self.portError(error) }
        // Before the other end exists anywhere else: every frame read from it names its sender.
        mine.setPassCredentials()
        guard addConnection(mine, policy: nil) else {
            mine.close()
            theirs.close()
            throw .invalidPort
        }
        return theirs
    }

    /// Makes `socket` one of this port's connections and registers it in the port's modes;
    /// false (the caller closes it) when the port is invalid. With a `policy`, every frame's
    /// sender must be admitted by it (checked on the loop thread, which alone calls this with one).
    func addConnection(_ socket: SeqPacketSocket, policy: MessagePort.Access?) -> Bool {
        let added: (PortConnections.Connection, PortConnections)? = lock.withLock {
            guard membership.isValid else { return nil }
            if state.connections == nil { state.connections = PortConnections() }
            if let policy { state.connections!.policies[socket.descriptor.rawValue] = policy }
            return (state.connections!.add(socket), state.connections!)
        }
        guard let (connection, connections) = added else { return false }
        // Unless the loop already dropped it (a peer that hung up at once, seen through a mode
        // that registered it meanwhile): its descriptor may be closed by now.
        membership.loop?.addRegistration(registration(of: connection, in: connections), for: self) {
            lock.withLock { state.connections?.sockets[socket.descriptor.rawValue]?.token == connection.token }
        }
        return true
    }

    /// The descriptor to put in a frame for this port: a proxy's own send right, or a local
    /// port's shared send right (made on first use). The caller does not own it.
    func transferableDescriptor() throws(PortError) -> Int32 {
        guard isValid else { throw .invalidPort }
        if let remote { return remote.descriptor.rawValue }
        guard conduit == nil else { throw .notTransferable }
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
    public var isProxy: Bool { proxyCounters != nil }

    /// Open connections of a local port: receive ends of send rights whose senders have not
    /// all closed (a connection counts until its descriptor is closed). Any thread; a lock.
    public var connectionCount: Int { lock.withLock { state.connections?.openCount ?? 0 } }

    /// Sets a closure told about dropped connections (`.malformedFrame(reason)` for a frame
    /// that broke the protocol, `.resourceExhausted` when received descriptors could not be
    /// installed). It runs on the receiving loop's thread. Without one, a line goes to stderr.
    /// Any thread; a lock.
    public func setTransportErrorHandler(_ handler: (@Sendable (PortError) -> Void)?) {
        lock.withLock { state.transportErrorHandler = handler }
    }

    // MARK: - Sending through a proxy

    /// Writes one frame, built in place; waits in poll(2) while the peer's buffer is full.
    /// `countsBlocked`: a wait for room counts in `sendersBlocked` (the async path counts its
    /// own suspension instead, once per send).
    func sendRemote(msgid: UInt32, payload: Message.Payload, replyPort: MessagePort?,
                    countsBlocked: Bool = true, deadline: () -> ContinuousClock.Instant?) throws(PortError) {
        if let conduit {
            try sendThroughConduit(conduit, Message(msgid: msgid, payload: payload, replyPort: replyPort),
                                   deadline: deadline)
            return
        }
        guard let remote, isValid else { throw .invalidPort }
        // The usual message, one DATA component and no port, takes one pass over one
        // component and gathers no descriptors.
        if replyPort == nil, case .data(let data) = payload {
            let size = try FrameWriter.size(ofSingleData: data.count)
            try transmit(frameOf: size, descriptors: [], through: remote, countsBlocked: countsBlocked, deadline: deadline) { buffer in
                FrameWriter.write(msgid: msgid, singleData: data, into: buffer)
            }
            return
        }
        let components = payload.components
        let size = try FrameWriter.size(of: components)
        // One descriptor per PORT component in table order, then the reply port (spec §3).
        var descriptors: [Int32] = []
        for case .port(let port) in components { descriptors.append(try port.transferableDescriptor()) }
        if let replyPort { descriptors.append(try replyPort.transferableDescriptor()) }
        try transmit(frameOf: size, descriptors: descriptors, through: remote, countsBlocked: countsBlocked, deadline: deadline) { buffer in
            FrameWriter.write(msgid: msgid, hasReplyPort: replyPort != nil, components: components, into: buffer)
        }
    }

    /// Builds a frame of `size` bytes on the stack with `write` and sends it with `descriptors`.
    @inline(__always)
    private func transmit(frameOf size: Int, descriptors: [Int32], through remote: SeqPacketSocket,
                          countsBlocked: Bool, deadline: () -> ContinuousClock.Instant?,
                          write: (UnsafeMutableRawBufferPointer) -> Void) throws(PortError) {
        let failure = withUnsafeTemporaryAllocation(byteCount: size, alignment: 8) { buffer -> PortError? in
            write(buffer)
            let frame = UnsafeRawBufferPointer(buffer)
            do throws(Errno) {
                try remote.send(frame, descriptors: descriptors)
                return nil
            } catch {
                return sendAfter(error, frame: frame, descriptors: descriptors, through: remote,
                                 countsBlocked: countsBlocked, deadline: deadline)
            }
        }
        if let failure { throw failure }
        proxyCounters?.sent.add(1, ordering: .relaxed)
    }

    /// The first write failed with `error`: waits while the peer's buffer is full and retries,
    /// or maps the error. Returns nil once the frame is sent.
    @inline(never)
    private func sendAfter(_ error: Errno, frame: UnsafeRawBufferPointer, descriptors: [Int32],
                           through remote: SeqPacketSocket, countsBlocked: Bool,
                           deadline: () -> ContinuousClock.Instant?) -> PortError? {
        var error = error
        var resolvedDeadline: ContinuousClock.Instant??
        while true {
            switch error.rawValue {
            case EAGAIN:
                if resolvedDeadline == nil {
                    resolvedDeadline = .some(deadline())
                    if countsBlocked { proxyCounters?.sendersBlocked.add(1, ordering: .relaxed) }
                }
                let bell: EventFD
                do { bell = try invalidationBell() } catch { return error }
                guard remote.waitUntilWritable(deadline: resolvedDeadline!, interruptedBy: bell) else { return .timedOut }
                guard isValid else { return .invalidPort }
            case EMSGSIZE:
                return .messageTooLarge(limit: Self.maximumFrameSize)
            case ENOBUFS, ENOMEM, ETOOMANYREFS:
                return .resourceExhausted(errno: error.rawValue)
            default:
                // EPIPE, ECONNRESET, ENOTCONN: the owner is gone. This is the dead-name notice.
                invalidate()
                return .invalidPort
            }
            do throws(Errno) {
                try remote.send(frame, descriptors: descriptors)
                return nil
            } catch let retry {
                error = retry
            }
        }
    }

    /// The proxy's invalidation bell, made on first use; `.invalidPort` once invalid (checked
    /// under the lock, so an invalidation either is seen here or rings the bell).
    func invalidationBell() throws(PortError) -> EventFD {
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

    /// A connection's readiness report: frames may be waiting on `socket`. Loop thread only; the
    /// loop then services the port, whose `readConnections` checks for a receiver and room.
    func connectionBecameReadable(_ socket: SeqPacketSocket, of connections: PortConnections) {
        connections.markPending(socket)
        // Read (under the lock) by a thread setting a receiver, which then tells the loop
        // if the loop found no receiver and left the connection pending.
        connectionsPending.store(true, ordering: .sequentiallyConsistent)
    }

    /// Reads waiting frames (while the queue has room and a receiver is set) and delivers up
    /// to `limit` messages. Loop thread only.
    func service(upTo limit: Int) -> Int {
        let direct = readConnections(budget: limit)
        // After a frame went straight to the receiver there is usually nothing queued: the
        // flag says so without the lock.
        guard direct < limit, direct == 0 || hasDeliverableMessages else { return direct }
        return direct + deliver(upTo: limit - direct)
    }

    /// Reads one frame from each connection reported readable, while the queue has room and a
    /// receiver (or a `messages()` consumer) is set; parks the connections it cannot read. A frame that finds nothing queued
    /// before it is delivered at once, up to `budget` of them; the others are queued. Returns
    /// how many were delivered. Loop thread only.
    private func readConnections(budget: Int) -> Int {
        guard connectionsPending.load(ordering: .relaxed) else { return 0 }
        var room = 0
        let connections: PortConnections? = lock.withLock {
            guard membership.isValid, let connections = state.connections else { return nil }
            room = state.readsFrames ? queueLimit - inbox.count : 0
            return connections
        }
        guard let connections else { return 0 }
        // Frames that found no room (senders in this process filled the queue after the loop
        // looked) go first, before their connections are read again.
        while room > 0, !connections.held.isEmpty, let position = claimForFrame() {
            inbox.slot(at: position).initialize(to: connections.held.popFirst()!)
            publish(position)
            room = queueLimit - inbox.count
        }
        if !connections.held.isEmpty { room = 0 }
        var delivered = 0
        swap(&connections.pending, &connections.reading)
        while let socket = connections.reading.popFirst() {
            if room > 0 {
                unpark(socket, of: connections)
                delivered += readFrame(from: socket, of: connections, room: &room, deliverNow: delivered < budget)
            } else {
                park(socket, of: connections)
            }
        }
        connectionsPending.store(!connections.pending.isEmpty || !connections.held.isEmpty, ordering: .sequentiallyConsistent)
        return delivered
    }

    /// Unregisters a connection that cannot be read now, and keeps it pending: a receiver being
    /// set, or room being made, makes the port deliverable, and the loop reads it then.
    private func park(_ socket: SeqPacketSocket, of connections: PortConnections) {
        connections.markPending(socket)
        let connection: PortConnections.Connection? = lock.withLock {
            guard !connections.parked.contains(socket), let connection = connections.sockets[socket.descriptor.rawValue] else {
                return nil
            }
            connections.parked.append(socket)
            return connection
        }
        if let connection { membership.loop?.removeRegistration(registration(of: connection, in: connections), for: self) }
    }

    /// Registers a parked connection again, now that it can be read (a no-op for one that is
    /// not parked, the usual case, which costs no lock).
    private func unpark(_ socket: SeqPacketSocket, of connections: PortConnections) {
        guard !connections.parked.isEmpty else { return }
        let connection: PortConnections.Connection? = lock.withLock {
            guard let index = connections.parked.firstIndex(of: socket) else { return nil }
            connections.parked.remove(at: index)
            return connections.sockets[socket.descriptor.rawValue]
        }
        guard let connection else { return }
        membership.loop?.addRegistration(registration(of: connection, in: connections), for: self) {
            lock.withLock { connections.sockets[socket.descriptor.rawValue] != nil && !connections.parked.contains(socket) }
        }
    }

    /// Reads one frame, if one is waiting. With `deliverNow`, a frame that finds the queue
    /// drained (and no batch of this port being delivered further up the stack) goes straight to
    /// a handler or delegate — it cannot overtake anything — and 1 is returned; otherwise it is
    /// queued, or held if the queue filled up since the loop looked. `room` is the queue's free
    /// space, kept current. A closed, failed or misbehaving
    /// connection is dropped: a zero-length record is the peer closing (or breaking the rule
    /// that frames are never empty), and a malformed frame ends its connection too.
    private func readFrame(from socket: SeqPacketSocket, of connections: PortConnections,
                           room: inout Int, deliverNow: Bool) -> Int {
        let batch = connections.batch
        let count: Int?
        do {
            count = try socket.receive(into: batch, upTo: 1)
        } catch {
            drop(socket, of: connections, reporting: nil)
            return 0
        }
        guard count == 1 else { return 0 }
        let record = batch[0]
        if record.endOfStream {
            drop(socket, of: connections, reporting: nil)
            return 0
        }
        // A connection made through a published name: its access policy holds for every frame,
        // whoever holds the socket now (named-ports.md §5).
        if !connections.policies.isEmpty, let policy = connections.policies[socket.descriptor.rawValue],
           !(record.credentials.map(policy.admits) ?? false) {
            for descriptor in record.descriptors { descriptor.close() }
            drop(socket, of: connections, reporting: .accessDenied)
            return 0
        }
        let message: Message
        do {
            message = try self.message(from: record)
        } catch {
            for descriptor in record.descriptors { descriptor.close() }
            drop(socket, of: connections, reporting: .malformedFrame(error))
            return 0
        }
        lock.lock()
        if deliverNow, !state.delivering, inbox.isDrained, membership.isValid,
           let receiver = state.receiver, receiver.takesOneAtATime {
            state.statistics.sent &+= 1
            state.statistics.delivered &+= 1
            lock.unlock()
            receiver.deliver(message)
            return 1
        }
        lock.unlock()
        // A frame that reaches an invalidated port is dropped like one still in its socket.
        guard membership.isValid else { return 0 }
        if let position = claimForFrame() {
            inbox.slot(at: position).initialize(to: message)
            publish(position)
            room = queueLimit - inbox.count
        } else {
            connections.held.append(message)
            room = 0
        }
        return 0
    }

    /// A slot for a frame's message, claimed as a sender in this process claims one but never
    /// waited for: nil when the queue filled up since the loop looked (or its ring could not be
    /// made). Loop thread.
    private func claimForFrame() -> UInt64? {
        switch inbox.claim() {
        case .success(let position): return position
        case .failure(.unallocated): return lock.withLock { inbox.allocate() } ? claimForFrame() : nil
        case .failure(.full): return nil
        }
    }

    /// Decodes and validates one received record into a message whose port components are
    /// proxies. On failure nothing has taken ownership of the record's descriptors.
    private func message(from record: ReceiveBatch.Record) throws(FrameError) -> Message {
        if record.truncated { throw .truncated }
        if record.descriptorsTruncated { throw .descriptorsTruncated }
        if record.unexpectedControl { throw .unexpectedControlMessage }
        let reader = try FrameReader(validating: record.bytes, descriptorCount: record.descriptors.count)
        let sender = record.credentials.flatMap(Sender.init(frameSender:))
        guard !record.descriptors.isEmpty else {
            // Validated: no descriptors means no port components and no reply port.
            return Message(msgid: reader.msgid, payload: reader.payload { nil }, replyPort: nil, sender: sender)
        }
        var sockets: [SeqPacketSocket] = []
        for descriptor in record.descriptors {
            guard let socket = try? SeqPacketSocket(adopting: descriptor) else { throw .descriptorNotAPort }
            sockets.append(socket)
        }
        var proxies = sockets.map { MessagePort(proxyFor: $0) }.makeIterator()
        let payload = reader.payload { proxies.next() }
        return Message(msgid: reader.msgid, payload: payload,
                       replyPort: reader.hasReplyPort ? proxies.next() : nil, sender: sender)
    }

    /// Ends one connection (loop thread): unregisters and closes it, and reports why.
    private func drop(_ socket: SeqPacketSocket, of connections: PortConnections, reporting error: PortError?) {
        let (removed, handler) = lock.withLock { (connections.remove(socket), state.transportErrorHandler) }
        if let removed { membership.loop?.removeRegistration(registration(of: removed, in: connections), for: self) }
        socket.close()
        if removed != nil { lock.withLock { connections.didClose() } }
        if let error { reportTransportError(error, to: handler) }
    }

    /// Tells the transport error handler (or stderr) why a connection was dropped. Loop thread.
    func reportTransportError(_ error: PortError) {
        reportTransportError(error, to: lock.withLock { state.transportErrorHandler })
    }

    private func reportTransportError(_ error: PortError, to handler: (@Sendable (PortError) -> Void)?) {
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

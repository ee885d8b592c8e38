#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import Synchronization

/// The cross-process transport (Protocols/port-message-frame.md): send rights as
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
        guard addConnection(PortConnection(madeHere: mine)) else {
            mine.close()
            theirs.close()
            throw .invalidPort
        }
        return theirs
    }

    /// Makes `connection` one of this port's connections and registers it in the port's modes;
    /// false (the caller closes it) when the port is invalid. A named connection's policy is then
    /// checked for every frame (on the loop thread, which alone adds named connections).
    func addConnection(_ connection: PortConnection) -> Bool {
        let connections: PortConnections? = lock.withLock {
            guard membership.isValid else { return nil }
            if state.connections == nil { state.connections = PortConnections() }
            if state.refusesPortComponents { connection.acceptDescriptors(false) }
            state.connections!.add(connection)
            return state.connections!
        }
        guard let connections else { return false }
        // Unless the loop already dropped it (a peer that hung up at once, seen through a mode
        // that registered it meanwhile): its descriptor may be closed by now.
        membership.loop?.addRegistration(registration(of: connection, in: connections), for: self) {
            lock.withLock { state.connections?.sockets[connection.socket.descriptor.rawValue] === connection }
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
        markIfReturningHere(socket)
    }

    /// True for a proxy (a send right to a port owned elsewhere), false for a local port.
    /// Any thread; free.
    public var isProxy: Bool { proxyCounters != nil }

    /// Open connections of a local port: receive ends of send rights whose senders have not
    /// all closed (a connection counts until its descriptor is closed). Any thread; a lock.
    public var connectionCount: Int { lock.withLock { state.connections?.openCount ?? 0 } }

    /// Sets a closure told about dropped connections and refused frames (`.malformedFrame(reason)`
    /// for a frame that broke the protocol, `.resourceExhausted` when received descriptors could
    /// not be installed, `.accessDenied`, `.portsRefused`, …). It runs on the receiving loop's
    /// thread. Without one, a line goes to stderr. Replaces a handler set with
    /// `setTransportReportHandler(_:)`, which also says who sent what was refused.
    /// Any thread; a lock.
    public func setTransportErrorHandler(_ handler: (@Sendable (PortError) -> Void)?) {
        guard let handler else { return setTransportReportHandler(nil) }
        setTransportReportHandler { report in handler(report.error) }
    }

    // MARK: - Sending through a proxy

    /// Writes one frame, built in place; waits in poll(2) while the peer's buffer is full.
    /// `countsBlocked`: a wait for room counts in `sendersBlocked` (the async path counts its
    /// own suspension instead, once per send).
    func sendRemote(msgid: UInt32, payload: Message.Payload, replyPort: MessagePort?, metadata: MessageMetadata?,
                    countsBlocked: Bool = true, deadline: () -> ContinuousClock.Instant?) throws(PortError) {
        if let conduit {
            try sendThroughConduit(conduit, Message(msgid: msgid, payload: payload, replyPort: replyPort,
                                                    metadata: metadata),
                                   deadline: deadline)
            return
        }
        guard let remote, isValid else { throw .invalidPort }
        // The usual message, one DATA component, no port and no metadata, takes one pass over
        // one component and gathers no descriptors.
        if replyPort == nil, metadata == nil, case .data(let data) = payload,
           data.count <= Self.appliedInlineDataLimit.load(ordering: .relaxed) {
            let size = try FrameWriter.size(ofSingleData: data.count)
            try transmit(frameOf: size, descriptors: [], through: remote, countsBlocked: countsBlocked, deadline: deadline) { buffer in
                FrameWriter.write(msgid: msgid, singleData: data, into: buffer)
            }
            return
        }
        // One descriptor per PORT and MEMORY component in table order, then the reply port (spec §3).
        var outgoing = try OutgoingFrame(payload.components)
        defer { outgoing.closeMadeMemory() }
        if let replyPort { outgoing.descriptors.append(try replyPort.transferableDescriptor()) }
        let size = try FrameWriter.size(of: outgoing.components, metadata: metadata)
        try transmit(frameOf: size, descriptors: outgoing.descriptors, through: remote, countsBlocked: countsBlocked, deadline: deadline) { buffer in
            FrameWriter.write(msgid: msgid, hasReplyPort: replyPort != nil, replyIsSendOnce: replyPort?.isSendOnce == true,
                              components: outgoing.components, metadata: metadata, into: buffer)
        }
    }

    /// Builds a frame of `size` bytes on the stack with `write` and sends it with `descriptors`.
    @inline(__always)
    private func transmit(frameOf size: Int, descriptors: [Int32], through remote: SeqPacketSocket,
                          countsBlocked: Bool, deadline: () -> ContinuousClock.Instant?,
                          write: (UnsafeMutableRawBufferPointer) -> Void) throws(PortError) {
        let returnsHere = proxyCounters?.returnsHere.load(ordering: .relaxed) == true
        if returnsHere { OwnReturns.sending(true) }
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
        if let failure {
            if returnsHere { OwnReturns.sending(false) }
            throw failure
        }
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
            case EPERM where !descriptors.isEmpty:
                // The owner's end refuses descriptors (SO_PASSRIGHTS off: acceptsPortComponents).
                return .portsRefused
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

    /// A connection's readiness report: frames may be waiting on it. Loop thread only; the
    /// loop then services the port, whose `readConnections` checks for a receiver and room.
    func connectionBecameReadable(_ connection: PortConnection, of connections: PortConnections) {
        connections.markPending(connection)
        // Read (under the lock) by a thread setting a receiver, which then tells the loop
        // if the loop found no receiver and left the connection pending.
        connectionsPending.store(true, ordering: .sequentiallyConsistent)
    }

    /// Reads waiting frames (while the queue has room and a receiver is set) and delivers up
    /// to `limit` messages, one callout of `loop` each. Loop thread only.
    func service(upTo limit: Int, on loop: ThreadRunLoop) -> Int {
        let direct = readConnections(budget: limit, on: loop)
        // After a frame went straight to the receiver there is usually nothing queued: the
        // flag says so without the lock.
        guard direct < limit, direct == 0 || (hasDeliverableMessages && !loop.passShouldYield) else { return direct }
        return direct + deliver(upTo: limit - direct, on: loop)
    }

    /// Reads one frame from each connection reported readable, while the queue has room and a
    /// receiver (or a `messages()` consumer) is set; parks the connections it cannot read. A frame that finds nothing queued
    /// before it is delivered at once, up to `budget` of them; the others are queued. Returns
    /// how many were delivered. Loop thread only.
    private func readConnections(budget: Int, on loop: ThreadRunLoop) -> Int {
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
        while let connection = connections.reading.popFirst() {
            if room > 0 {
                unpark(connection, of: connections)
                delivered += readFrame(from: connection, of: connections, room: &room,
                                       deliverNow: delivered < budget && (delivered == 0 || !loop.passShouldYield), on: loop)
            } else {
                park(connection, of: connections)
            }
        }
        connectionsPending.store(!connections.pending.isEmpty || !connections.held.isEmpty, ordering: .sequentiallyConsistent)
        return delivered
    }

    /// Unregisters a connection that cannot be read now, and keeps it pending: a receiver being
    /// set, or room being made, makes the port deliverable, and the loop reads it then.
    private func park(_ connection: PortConnection, of connections: PortConnections) {
        connections.markPending(connection)
        let parked: Bool = lock.withLock {
            guard !connections.parked.contains(where: { $0 === connection }),
                  connections.sockets[connection.socket.descriptor.rawValue] === connection else { return false }
            connections.parked.append(connection)
            return true
        }
        if parked { membership.loop?.removeRegistration(registration(of: connection, in: connections), for: self) }
    }

    /// Registers a parked connection again, now that it can be read (a no-op for one that is
    /// not parked, the usual case, which costs no lock).
    private func unpark(_ connection: PortConnection, of connections: PortConnections) {
        guard !connections.parked.isEmpty else { return }
        let unparked: Bool = lock.withLock {
            guard let index = connections.parked.firstIndex(where: { $0 === connection }) else { return false }
            connections.parked.remove(at: index)
            return connections.sockets[connection.socket.descriptor.rawValue] === connection
        }
        guard unparked else { return }
        membership.loop?.addRegistration(registration(of: connection, in: connections), for: self) {
            lock.withLock {
                connections.sockets[connection.socket.descriptor.rawValue] === connection
                    && !connections.parked.contains { $0 === connection }
            }
        }
    }

    /// Reads one frame, if one is waiting. With `deliverNow`, a frame that finds the queue
    /// drained (and no batch of this port being delivered further up the stack) goes straight to
    /// a handler or delegate — it cannot overtake anything — as a callout of `loop`, and 1 is
    /// returned; otherwise it is queued, or held if the queue filled up since the loop looked.
    /// `room` is the queue's free space, kept current. A closed, failed or misbehaving
    /// connection is dropped: a zero-length record is the peer closing (or breaking the rule
    /// that frames are never empty), and a malformed frame ends its connection too.
    private func readFrame(from connection: PortConnection, of connections: PortConnections,
                           room: inout Int, deliverNow: Bool, on loop: ThreadRunLoop) -> Int {
        let batch = connections.batch
        let count: Int?
        do {
            count = try connection.socket.receive(into: batch, upTo: 1)
        } catch {
            drop(connection, of: connections, reporting: nil)
            return 0
        }
        guard count == 1 else { return 0 }
        let record = batch[0]
        if record.endOfStream {
            record.closeDescriptors()
            drop(connection, of: connections, reporting: nil)
            return 0
        }
        let sender = record.credentials.map { connection.sender($0, process: record.process) }
        if record.credentials == nil, case .success(let process)? = record.process { process.close() }
        // Only a named connection or a frame with descriptors can be refused here: the usual
        // frame skips the call.
        if connection.named != nil || !record.descriptors.isEmpty, let refusal = refusal(of: record, from: sender, on: connection) {
            for descriptor in record.descriptors { descriptor.close() }
            if refusal.error == .portsRefused {
                // The frame alone is refused: the connection may carry frames without ports.
                reportTransportError(refusal)
            } else {
                drop(connection, of: connections, reporting: refusal)
            }
            return 0
        }
        if record.descriptorsNotInstalled {
            for descriptor in record.descriptors { descriptor.close() }
            discardForExhaustion(sender: sender, on: connection)
            return 0
        }
        let decoded: (msgid: UInt32, payload: Message.Payload, replyPort: MessagePort?, metadata: MessageMetadata?)
        do {
            decoded = try decode(record)
        } catch {
            for descriptor in record.descriptors { descriptor.close() }
            drop(connection, of: connections,
                 reporting: TransportReport(error: error, sender: sender, connector: connection.named?.connector))
            return 0
        }
        // The sender moves into the message: copied, it cost a retain and a release of its pin.
        let message = Message(msgid: decoded.msgid, payload: decoded.payload, replyPort: decoded.replyPort,
                              sender: consume sender, metadata: decoded.metadata)
        lock.lock()
        if deliverNow, !state.delivering, inbox.isDrained, membership.isValid,
           let receiver = state.receiver, receiver.takesOneAtATime {
            state.statistics.sent &+= 1
            state.statistics.delivered &+= 1
            lock.unlock()
            receiver.deliver(message, from: self, on: loop)
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

    /// Why a record read from `connection` must not be delivered, or nil. A connection made
    /// through a published name checks each frame's sender (`PortConnection.refusal(of:)`). A
    /// port that refuses port components refuses a frame with descriptors (one queued before it
    /// began to refuse, or on a kernel without SO_PASSRIGHTS).
    private func refusal(of record: ReceiveBatch.Record, from sender: Sender?, on connection: PortConnection) -> TransportReport? {
        if let named = connection.named, let error = connection.refusal(of: sender) {
            return TransportReport(error: error, sender: sender, connector: named.connector)
        }
        if !record.descriptors.isEmpty, lock.withLock({ state.refusesPortComponents }) {
            return TransportReport(error: .portsRefused, sender: sender, connector: connection.named?.connector)
        }
        return nil
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
    /// proxies and whose MEMORY components are Data over read-only mappings, in the order of
    /// checks of the spec (§5): `.malformedFrame`, then `.messageTooLarge` past
    /// `maximumIncomingDataSize`, then the descriptors (`.malformedFrame`), then
    /// `.resourceExhausted` when memory cannot be mapped. On failure nothing has taken ownership
    /// of the record's descriptors.
    private func decode(_ record: ReceiveBatch.Record) throws(PortError) -> (msgid: UInt32, payload: Message.Payload,
                                                                          replyPort: MessagePort?,
                                                                          metadata: MessageMetadata?) {
        if record.truncated { throw .malformedFrame(.truncated) }
        if record.descriptorsTruncated { throw .malformedFrame(.descriptorsTruncated) }
        if record.unexpectedControl { throw .malformedFrame(.unexpectedControlMessage) }
        let reader: FrameReader
        do { reader = try FrameReader(validating: record.bytes, descriptorCount: record.descriptors.count) } catch {
            throw .malformedFrame(error)
        }
        try checkIncomingDataSize(reader.dataTotal)
        guard !record.descriptors.isEmpty else {
            // Validated: no descriptors means no port or memory components and no reply port.
            return (reader.msgid, reader.payload(nextPort: { nil }, nextMemory: { nil }), nil, reader.metadata())
        }
        let attachments = try IncomingAttachments(record.descriptors, of: reader)
        var proxies = attachments.sockets.map { socket in
            let proxy = MessagePort(proxyFor: socket)
            proxy.markIfReturningHere(socket)
            return proxy
        }.makeIterator()
        var memory = attachments.memory.makeIterator()
        let payload = reader.payload(nextPort: { proxies.next() }, nextMemory: { memory.next() })
        let replyPort = reader.hasReplyPort ? proxies.next() : nil
        // The right the requester made send-once stays so in this process (§3.50).
        if reader.replyIsSendOnce { replyPort?.makeSendOnce() }
        return (reader.msgid, payload, replyPort, reader.metadata())
    }

    /// Ends one connection (loop thread): unregisters and closes it, and reports why.
    private func drop(_ connection: PortConnection, of connections: PortConnections, reporting report: TransportReport?) {
        let (removed, handler) = lock.withLock { (connections.remove(connection), state.transportErrorHandler) }
        if removed { membership.loop?.removeRegistration(registration(of: connection, in: connections), for: self) }
        connection.close()
        if removed { lock.withLock { connections.didClose() } }
        if let report, let report = throttled(report, on: connection) { reportTransportError(report, to: handler) }
    }

    /// Tells the transport report handler (or stderr) what was refused or dropped. Loop thread.
    func reportTransportError(_ report: TransportReport) {
        reportTransportError(report, to: lock.withLock { state.transportErrorHandler })
    }

    private func reportTransportError(_ report: TransportReport, to handler: (@Sendable (TransportReport) -> Void)?) {
        if let handler {
            handler(report)
        } else {
            var line = Array("RunLoopKit: \(self): \(report)\n".utf8)
            _ = write(STDERR_FILENO, &line, line.count)
        }
    }

    static func portError(_ error: Errno) -> PortError {
        error.isResourceExhaustion ? .resourceExhausted(errno: error.rawValue) : .invalidPort
    }
}

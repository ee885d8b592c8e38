/// The receive ends of a local port's send rights: one SOCK_SEQPACKET socket per right handed
/// out. Each is registered in every epoll set of the modes holding the port, under its own
/// token, so a frame wakes the loop directly: a set of connections behind one nested epoll
/// would cost every frame a second wake-up chain and a second ready-list scan.
///
/// Registrations are level-triggered, so the loop reads one frame per readiness report and
/// never spends a read learning that a connection is drained. A connection the loop cannot
/// read (no receiver yet, or a full queue) is parked — unregistered, so that its readiness
/// cannot wake the loop over and over — and registered again when it can be read.
///
/// `sockets` is guarded by the port's lock. Reading happens only on the port's loop thread,
/// which is also the only thread that closes a connection (other threads shut them down), so
/// the lists of connections to read are the loop thread's alone.
final class PortConnections: @unchecked Sendable {
    struct Connection {
        let socket: SeqPacketSocket
        let token: UInt64
    }

    // Guarded by the port's lock or confined to the loop thread (see above): the runtime's
    // exclusivity bookkeeping would only repeat that, at a cost per frame.
    @exclusivity(unchecked) var sockets: [Int32: Connection] = [:]
    /// Connections removed from `sockets` whose descriptors are not closed yet (they are
    /// unregistered first). Guarded by the port's lock.
    @exclusivity(unchecked) var closing = 0
    /// Connections reported readable (or parked) and not read since. Loop thread only.
    @exclusivity(unchecked) var pending = RingBuffer<SeqPacketSocket>(initialCapacity: 4)
    /// The pending connections being read, swapped with `pending`. Loop thread only.
    @exclusivity(unchecked) var reading = RingBuffer<SeqPacketSocket>(initialCapacity: 4)
    /// Connections parked because they could not be read: unregistered from the loop until
    /// they can. Written only by the loop thread, with the port's lock held (registrations are
    /// computed under it on any thread), so the loop thread may also read it without the lock.
    @exclusivity(unchecked) var parked: [SeqPacketSocket] = []
    /// Messages of frames read when the port's queue had no room left for them (senders in this
    /// process filled it after the loop looked), in the order read: queued before any connection
    /// is read again. Loop thread only.
    @exclusivity(unchecked) var held = RingBuffer<MessagePort.Message>(initialCapacity: 1)
    /// Access policies of the connections made through a published name, by descriptor. Written
    /// and read on the loop thread only (they are accepted and dropped there).
    @exclusivity(unchecked) var policies: [Int32: MessagePort.Access] = [:]
    /// The receive buffer. Used on the loop thread only. Pages of the 64 KiB buffer that small
    /// frames never touch never become resident.
    let batch = ReceiveBatch(capacity: 1, bytesPerRecord: PortFrame.maximumFrameSize + 1,
                             descriptorsPerRecord: PortFrame.maximumDescriptors)

    /// Adds a connection; returns it for registration in the port's modes.
    func add(_ socket: SeqPacketSocket) -> Connection {
        let connection = Connection(socket: socket, token: Source1Token.next())
        sockets[socket.descriptor.rawValue] = connection
        return connection
    }

    /// Forgets one connection (lock held, loop thread). The caller unregisters it, closes it,
    /// then calls `didClose()`.
    func remove(_ socket: SeqPacketSocket) -> Connection? {
        pending.removeAll { $0 == socket }
        parked.removeAll { $0 == socket }
        if !policies.isEmpty { policies[socket.descriptor.rawValue] = nil }
        let removed = sockets.removeValue(forKey: socket.descriptor.rawValue)
        if removed != nil { closing += 1 }
        return removed
    }

    /// A removed connection's descriptor is closed (lock held).
    func didClose() { closing -= 1 }

    /// Open connections: registered, parked, or removed and about to be closed (lock held).
    var openCount: Int { sockets.count + closing }

    /// Records a readiness report (loop thread); a connection is listed once. Reports come only
    /// for registered connections: a dropped one is unregistered before the loop looks again.
    func markPending(_ socket: SeqPacketSocket) {
        guard !pending.contains(where: { $0 == socket }) else { return }
        pending.append(socket)
    }

    func shutdownAll() {
        for connection in sockets.values { connection.socket.shutdown() }
    }

    func closeAll() {
        for connection in sockets.values { connection.socket.close() }
        sockets.removeAll()
        pending.removeAll()
        parked.removeAll()
        held.removeAll()
        policies.removeAll()
    }

    /// The registered (not parked) connections (lock held).
    var registered: some Sequence<Connection> {
        sockets.values.lazy.filter { !self.parked.contains($0.socket) }
    }
}

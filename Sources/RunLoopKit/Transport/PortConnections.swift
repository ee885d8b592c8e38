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
    // Guarded by the port's lock or confined to the loop thread (see above): the runtime's
    // exclusivity bookkeeping would only repeat that, at a cost per frame.
    @exclusivity(unchecked) var sockets: [Int32: PortConnection] = [:]
    /// Connections removed from `sockets` whose descriptors are not closed yet (they are
    /// unregistered first). Guarded by the port's lock.
    @exclusivity(unchecked) var closing = 0
    /// Connections reported readable (or parked) and not read since. Loop thread only.
    @exclusivity(unchecked) var pending = RingBuffer<PortConnection>(initialCapacity: 4)
    /// The pending connections being read, swapped with `pending`. Loop thread only.
    @exclusivity(unchecked) var reading = RingBuffer<PortConnection>(initialCapacity: 4)
    /// Connections parked because they could not be read: unregistered from the loop until
    /// they can. Written only by the loop thread, with the port's lock held (registrations are
    /// computed under it on any thread), so the loop thread may also read it without the lock.
    @exclusivity(unchecked) var parked: [PortConnection] = []
    /// Open connections made through a published name, by the uid of the process that connected
    /// (`NameLimits.connectionsPerUser`). Guarded by the port's lock.
    @exclusivity(unchecked) var namedByUser: [UInt32: Int] = [:]
    /// Messages of frames read when the port's queue had no room left for them (senders in this
    /// process filled it after the loop looked), in the order read: queued before any connection
    /// is read again. Loop thread only.
    @exclusivity(unchecked) var held = RingBuffer<MessagePort.Message>(initialCapacity: 1)
    /// The receive buffer. Used on the loop thread only. Pages of the 64 KiB buffer that small
    /// frames never touch never become resident.
    let batch = ReceiveBatch(capacity: 1, bytesPerRecord: PortFrame.maximumFrameSize + 1,
                             descriptorsPerRecord: PortFrame.maximumDescriptors)

    /// Adds a connection (lock held), for registration in the port's modes.
    func add(_ connection: PortConnection) {
        sockets[connection.socket.descriptor.rawValue] = connection
        if let uid = connection.named?.connector.uid { namedByUser[uid, default: 0] += 1 }
    }

    /// Forgets one connection (lock held, loop thread). The caller unregisters it, closes it,
    /// then calls `didClose()`. False when it was not one of them.
    func remove(_ connection: PortConnection) -> Bool {
        pending.removeAll { $0 === connection }
        parked.removeAll { $0 === connection }
        guard sockets.removeValue(forKey: connection.socket.descriptor.rawValue) != nil else { return false }
        if let uid = connection.named?.connector.uid { forgetNamed(of: uid) }
        closing += 1
        return true
    }

    private func forgetNamed(of uid: UInt32) {
        let count = namedByUser[uid, default: 1] - 1
        namedByUser[uid] = count > 0 ? count : nil
    }

    /// A removed connection's descriptor is closed (lock held).
    func didClose() { closing -= 1 }

    /// Open connections: registered, parked, or removed and about to be closed (lock held).
    var openCount: Int { sockets.count + closing }

    /// Records a readiness report (loop thread); a connection is listed once. Reports come only
    /// for registered connections: a dropped one is unregistered before the loop looks again.
    func markPending(_ connection: PortConnection) {
        guard !pending.contains(where: { $0 === connection }) else { return }
        pending.append(connection)
    }

    func shutdownAll() {
        for connection in sockets.values { connection.socket.shutdown() }
    }

    func closeAll() {
        for connection in sockets.values { connection.close() }
        sockets.removeAll()
        pending.removeAll()
        parked.removeAll()
        namedByUser.removeAll()
        held.removeAll()
    }

    /// The registered (not parked) connections (lock held).
    var registered: some Sequence<PortConnection> {
        sockets.values.lazy.filter { connection in !self.parked.contains { $0 === connection } }
    }
}

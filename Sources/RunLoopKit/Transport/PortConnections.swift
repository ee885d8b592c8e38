/// The receive ends of a local port's send rights: one SOCK_SEQPACKET socket per right handed
/// out, all in one epoll set that the port registers (edge-triggered) in its loop's modes.
///
/// `sockets` is guarded by the port's lock; reading happens only on the port's loop thread,
/// which is also the only thread that closes a connection (other threads shut them down).
final class PortConnections: @unchecked Sendable {
    let set: Epoll
    var sockets: [Int32: SeqPacketSocket] = [:]
    /// Receive buffers for a few records per system call. Used on the loop thread only. Pages
    /// of the 64 KiB buffers that small frames never touch never become resident.
    let batch = ReceiveBatch(capacity: 4, bytesPerRecord: PortFrame.maximumFrameSize + 1,
                             descriptorsPerRecord: PortFrame.maximumDescriptors)

    init() throws(Errno) {
        set = try Epoll()
    }

    func add(_ socket: SeqPacketSocket) throws(Errno) {
        try set.add(socket.descriptor, interest: [.readable], token: UInt64(socket.descriptor.rawValue))
        sockets[socket.descriptor.rawValue] = socket
    }

    /// Removes and closes one connection (loop thread, lock held).
    func drop(_ socket: SeqPacketSocket) {
        set.remove(socket.descriptor)
        sockets[socket.descriptor.rawValue] = nil
        socket.close()
    }

    func shutdownAll() {
        for socket in sockets.values { socket.shutdown() }
    }

    func closeAll() {
        for socket in sockets.values { socket.close() }
        sockets.removeAll()
    }
}

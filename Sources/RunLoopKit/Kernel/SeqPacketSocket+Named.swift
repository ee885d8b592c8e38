#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// What a named-port connection needs beyond a socketpair end: connecting to a listener,
/// credentials, and the small blocking exchange of the handshake on the connecting side.
extension SeqPacketSocket {
    /// Connects to the listener at abstract address `name`, waiting until `deadline` at most for
    /// room in its backlog. Throws ECONNREFUSED when nothing listens there, EAGAIN when the
    /// deadline passed. The socket is blocking until `makeNonBlocking()`.
    static func connect(toAbstractName name: [UInt8], deadline: ContinuousClock.Instant) throws(Errno) -> SeqPacketSocket {
        let fd = try syscallRetryingEINTR {
            Glibc.socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        let connecting = SeqPacketSocket(descriptor: FileDescriptor(rawValue: fd))
        // A full backlog makes connect(2) sleep for the send timeout (SO_SNDTIMEO), where zero
        // would mean for ever: at least a microsecond.
        let remaining = max(ContinuousClock.now.duration(to: deadline), .microseconds(1))
        let (seconds, attoseconds) = remaining.components
        var limit = timeval(tv_sec: Int(seconds), tv_usec: max(Int(attoseconds / 1_000_000_000_000), seconds == 0 ? 1 : 0))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        let result = withAbstractAddress(name) { address, length in Glibc.connect(fd, address, length) }
        if result != 0 {
            let error = Errno.current
            connecting.close()
            throw error == .interrupted ? Errno(rawValue: ETIMEDOUT) : error
        }
        return connecting
    }

    /// The process at the other end as the kernel recorded it at connect(2)/listen(2) time.
    var peerCredentials: Credentials? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard crlk_peer_credentials(descriptor.rawValue, &pid, &uid, &gid) == 0 else { return nil }
        return Credentials(pid: pid, uid: uid, gid: gid)
    }

    /// Asks the kernel to attach the sender's credentials to every record read from this end.
    func setPassCredentials() {
        var on: Int32 = 1
        _ = setsockopt(descriptor.rawValue, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
    }

    func makeNonBlocking() throws(Errno) {
        let flags = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_GETFL) }
        _ = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_SETFL, flags | O_NONBLOCK) }
    }

    /// Sleeps until a record (or end-of-stream) can be read, or `deadline` passes (false).
    func waitUntilReadable(deadline: ContinuousClock.Instant) -> Bool {
        var entry = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        while true {
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero else { return false }
            let timeout = Int32(clamping: (remaining.nanoseconds + 999_999) / 1_000_000)
            let n = poll(&entry, 1, timeout)
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return true }
        }
    }

    /// Reads one record of at most `capacity` bytes without blocking, with no descriptors
    /// expected (any that come are closed). Nil when none is waiting; an empty array is
    /// end-of-stream; a longer record is cut to `capacity + 1` bytes so the caller sees it is
    /// too long.
    func receiveSmallRecord(capacity: Int) throws(Errno) -> (bytes: [UInt8], credentials: Credentials?, extras: Bool)? {
        let batch = ReceiveBatch(capacity: 1, bytesPerRecord: capacity + 1, descriptorsPerRecord: 4)
        guard let count = try receive(into: batch, upTo: 1), count == 1 else { return nil }
        let record = batch[0]
        record.closeDescriptors()
        let extras = !record.descriptors.isEmpty || record.truncated || record.descriptorsTruncated || record.unexpectedControl
        return (Array(record.bytes), record.credentials, extras)
    }
}

extension SeqPacketSocket {
    /// The abstract address of the listener this socket connected to (getpeername(2)); nil for
    /// a socketpair end, a path address or a socket that is not connected.
    var peerAbstractName: [UInt8]? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor.rawValue, $0, &length) }
        }
        return result == 0 ? abstractName(in: address, length: length) : nil
    }
}

/// The abstract name in `address` (the bytes after sun_path's leading NUL), or nil for a path
/// or an unnamed address.
func abstractName(in address: sockaddr_un, length: socklen_t) -> [UInt8]? {
    let pathOffset = MemoryLayout<sa_family_t>.size
    guard Int(length) > pathOffset + 1 else { return nil }
    return withUnsafeBytes(of: address.sun_path) { path in
        path[0] == 0 ? Array(path[1..<(Int(length) - pathOffset)]) : nil
    }
}

#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// One end of an AF_UNIX SOCK_SEQPACKET socketpair: reliable, ordered records with
/// boundaries, carrying descriptors as SCM_RIGHTS. The cross-process port transport's wire.
struct SeqPacketSocket: Sendable, Hashable {
    let descriptor: FileDescriptor

    /// A connected pair, both ends non-blocking; close-on-exec unless `inheritable` (which
    /// applies to the second end only: the one handed to another process).
    static func makePair(inheritable: Bool = false) throws(Errno) -> (SeqPacketSocket, SeqPacketSocket) {
        var fds: [Int32] = [-1, -1]
        _ = try syscallRetryingEINTR {
            socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
        }
        let pair = (SeqPacketSocket(descriptor: FileDescriptor(rawValue: fds[0])),
                    SeqPacketSocket(descriptor: FileDescriptor(rawValue: fds[1])))
        if inheritable {
            _ = try? syscallRetryingEINTR { fcntl(fds[1], F_SETFD, 0) }
        }
        return pair
    }

    /// Wraps a descriptor after checking that it is an AF_UNIX SOCK_SEQPACKET socket, and
    /// makes it non-blocking. Throws EBADF/ENOTSOCK/EPROTOTYPE otherwise.
    init(adopting descriptor: FileDescriptor) throws(Errno) {
        guard Self.isSeqPacketUnixSocket(descriptor) else { throw Errno(rawValue: EPROTOTYPE) }
        let flags = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_GETFL) }
        _ = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_SETFL, flags | O_NONBLOCK) }
        self.descriptor = descriptor
    }

    private init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// Whether `descriptor` is an AF_UNIX SOCK_SEQPACKET socket (what a port send right is).
    static func isSeqPacketUnixSocket(_ descriptor: FileDescriptor) -> Bool {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(descriptor.rawValue, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        return option(SO_DOMAIN) == AF_UNIX && option(SO_TYPE) == Int32(SOCK_SEQPACKET.rawValue)
    }

    /// Sends one record with `descriptors` attached, without blocking and without SIGPIPE.
    /// Throws EAGAIN when the peer's buffer is full, EPIPE/ECONNRESET when the peer is gone.
    func send(_ bytes: [UInt8], descriptors: [Int32] = []) throws(Errno) {
        _ = try syscallRetryingEINTR {
            bytes.withUnsafeBytes { buffer in
                crlk_sendmsg_fds(descriptor.rawValue, buffer.baseAddress, buffer.count, descriptors,
                                 Int32(descriptors.count), Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
            }
        }
    }

    /// One received record: its bytes (at most the buffer given), its descriptors, and what the
    /// kernel reported about truncation.
    struct Received {
        var byteCount: Int
        var descriptors: [FileDescriptor]
        var truncated: Bool
        var descriptorsTruncated: Bool
        var unexpectedControl: Bool
        /// The peer closed its end (a zero-length read with no record).
        var endOfStream: Bool { byteCount == 0 && descriptors.isEmpty && !truncated }
    }

    /// Receives one record without blocking into `buffer`, with room for as many descriptors as
    /// `descriptorBuffer` holds; nil when none is queued (EAGAIN).
    func receive(into buffer: UnsafeMutableRawBufferPointer,
                 descriptorBuffer fds: UnsafeMutableBufferPointer<Int32>) throws(Errno) -> Received? {
        var count: Int32 = 0
        var flags: Int32 = 0
        var unexpected: Int32 = 0
        let n: Int
        do {
            n = try syscallRetryingEINTR {
                crlk_recvmsg_fds(descriptor.rawValue, buffer.baseAddress, buffer.count, fds.baseAddress, Int32(fds.count),
                                 &count, &flags, &unexpected, Int32(MSG_DONTWAIT))
            }
        } catch {
            if error == .wouldBlock { return nil }
            throw error
        }
        return Received(byteCount: n,
                        descriptors: count == 0 ? [] : fds.prefix(Int(count)).map(FileDescriptor.init(rawValue:)),
                        truncated: flags & Int32(MSG_TRUNC) != 0,
                        descriptorsTruncated: flags & Int32(MSG_CTRUNC) != 0,
                        unexpectedControl: unexpected != 0)
    }

    /// Sleeps until the socket can take a record, the peer hangs up, or `deadline` passes
    /// (poll(2) with a timeout, no spinning). Returns false on timeout.
    func waitUntilWritable(deadline: ContinuousClock.Instant?) -> Bool {
        while true {
            var entry = pollfd(fd: descriptor.rawValue, events: Int16(POLLOUT), revents: 0)
            let timeout: Int32
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline)
                guard remaining > .zero else { return false }
                timeout = Int32(clamping: (remaining.nanoseconds + 999_999) / 1_000_000)
            } else {
                timeout = -1
            }
            let n = poll(&entry, 1, timeout)
            if n > 0 { return true }
            if n < 0 && errno != EINTR { return true }
        }
    }

    /// Shuts both directions down: the peer sees end-of-stream and EPIPE at once, while the
    /// descriptor stays valid for any thread still using it (it is closed later, by its owner).
    func shutdown() {
        _ = Glibc.shutdown(descriptor.rawValue, Int32(SHUT_RDWR))
    }

    /// A new descriptor for the same socket (close-on-exec unless `inheritable`).
    func duplicate(inheritable: Bool) throws(Errno) -> FileDescriptor {
        let fd = try syscallRetryingEINTR { fcntl(descriptor.rawValue, inheritable ? F_DUPFD : F_DUPFD_CLOEXEC, 0) }
        return FileDescriptor(rawValue: fd)
    }

    func close() { descriptor.close() }
}

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

    /// Wraps a descriptor known to be a non-blocking SOCK_SEQPACKET socket (made by this layer).
    init(descriptor: FileDescriptor) { self.descriptor = descriptor }

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
        let result = bytes.withUnsafeBytes { buffer in
            Result { () throws(Errno) in try send(buffer, descriptors: descriptors) }
        }
        try result.get()
    }

    /// Sends one record from raw bytes (see `send(_:descriptors:)`).
    func send(_ bytes: UnsafeRawBufferPointer, descriptors: [Int32]) throws(Errno) {
        _ = try syscallRetryingEINTR {
            crlk_sendmsg_fds(descriptor.rawValue, bytes.baseAddress, bytes.count, descriptors,
                             Int32(descriptors.count), Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL))
        }
    }

    /// Receives up to `limit` (at most `batch.capacity`) queued records without blocking: one
    /// recvmsg(2) for one record, one recvmmsg(2) for several.
    /// Returns how many arrived (fewer than asked: nothing else was queued), nil when none was.
    func receive(into batch: ReceiveBatch, upTo limit: Int) throws(Errno) -> Int? {
        do {
            return Int(try syscallRetryingEINTR {
                crlk_recvmmsg_fds(descriptor.rawValue, batch.records, Int32(min(limit, batch.capacity)), Int32(MSG_DONTWAIT))
            })
        } catch {
            if error == .wouldBlock { return nil }
            throw error
        }
    }

    /// Sleeps until the socket can take a record, the peer hangs up, `interrupt` (if any) is
    /// rung, or `deadline` passes (poll(2) with a timeout, no spinning). Returns false on timeout.
    func waitUntilWritable(deadline: ContinuousClock.Instant?, interruptedBy interrupt: EventFD? = nil) -> Bool {
        var entries = [pollfd(fd: descriptor.rawValue, events: Int16(POLLOUT), revents: 0)]
        if let interrupt { entries.append(pollfd(fd: interrupt.descriptor.rawValue, events: Int16(POLLIN), revents: 0)) }
        while true {
            let timeout: Int32
            if let deadline {
                let remaining = ContinuousClock.now.duration(to: deadline).nanoseconds
                guard remaining > 0 else { return false }
                // Rounded up to whole milliseconds without the `+ 999_999` that overflows near Int64.max.
                timeout = Int32(clamping: remaining / 1_000_000 + (remaining % 1_000_000 == 0 ? 0 : 1))
            } else {
                timeout = -1
            }
            let n = poll(&entries, nfds_t(entries.count), timeout)
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

/// Buffers for receiving one record, or several with one recvmmsg(2): each record gets room for the
/// largest legal frame plus one byte (so an oversized record shows up as too large or
/// truncated rather than fitting by accident) and for the most descriptors a frame may carry.
/// Owned and used by one thread at a time.
final class ReceiveBatch {
    let capacity: Int
    let records: UnsafeMutablePointer<crlk_record>

    init(capacity: Int, bytesPerRecord: Int, descriptorsPerRecord: Int) {
        self.capacity = capacity
        records = .allocate(capacity: capacity)
        for index in 0..<capacity {
            records[index] = crlk_record(
                buffer: UnsafeMutableRawPointer.allocate(byteCount: bytesPerRecord, alignment: 8),
                capacity: bytesPerRecord,
                fds: UnsafeMutablePointer<Int32>.allocate(capacity: descriptorsPerRecord),
                max_fds: Int32(descriptorsPerRecord),
                length: 0, fd_count: 0, msg_flags: 0, unexpected_control: 0,
                has_credentials: 0, pid: 0, uid: 0, gid: 0, has_pidfd: 0, pidfd: -1)
        }
    }

    deinit {
        for index in 0..<capacity {
            records[index].buffer.deallocate()
            records[index].fds.deallocate()
        }
        records.deallocate()
    }

    /// One received record: its bytes, its descriptors (now owned by the caller), and what the
    /// kernel reported about truncation.
    struct Record {
        var bytes: UnsafeRawBufferPointer
        var descriptors: [FileDescriptor]
        var truncated: Bool
        var descriptorsTruncated: Bool
        /// MSG_CTRUNC with room left for descriptors: the kernel could not install them all in
        /// this process (no descriptor number left, EMFILE/ENFILE) and closed the rest.
        var descriptorsNotInstalled: Bool
        var unexpectedControl: Bool
        /// The sending process as the kernel reports it (the receive end has SO_PASSCRED set).
        var credentials: Credentials?
        /// The sending process as a pidfd (the receive end has SO_PASSPIDFD set), now owned by
        /// the caller, or why the kernel could not make one.
        var process: Result<ProcessDescriptor, Errno>?
        /// The peer closed its end: a zero-length record with no descriptors.
        var endOfStream: Bool { bytes.isEmpty && descriptors.isEmpty && !truncated }

        /// Closes every descriptor the record brought: a record that is dropped.
        func closeDescriptors() {
            for descriptor in descriptors { descriptor.close() }
            if case .success(let process)? = process { process.close() }
        }
    }

    subscript(index: Int) -> Record {
        let record = records[index]
        let count = Int(record.fd_count)
        return Record(
            bytes: UnsafeRawBufferPointer(start: record.buffer, count: record.length),
            descriptors: count == 0 ? [] : (0..<count).map { FileDescriptor(rawValue: record.fds[$0]) },
            truncated: record.msg_flags & Int32(MSG_TRUNC) != 0,
            descriptorsTruncated: record.msg_flags & Int32(MSG_CTRUNC) != 0,
            descriptorsNotInstalled: record.msg_flags & Int32(MSG_CTRUNC) != 0 && count < Int(record.max_fds),
            unexpectedControl: record.unexpected_control != 0,
            credentials: record.has_credentials != 0
                ? Credentials(pid: record.pid, uid: record.uid, gid: record.gid) : nil,
            process: record.has_pidfd != 0 ? Self.process(record.pidfd) : nil)
    }

    /// An SCM_PIDFD's value: a pidfd, or minus the errno of the kernel's failure to make one.
    private static func process(_ value: Int32) -> Result<ProcessDescriptor, Errno> {
        guard value >= 0 else { return .failure(Errno(rawValue: -value)) }
        let process = ProcessDescriptor(adopting: FileDescriptor(rawValue: value))
        if let fault = KernelFault.injected(into: .receivedPidfd) {
            process.close()
            return .failure(fault)
        }
        return .success(process)
    }
}

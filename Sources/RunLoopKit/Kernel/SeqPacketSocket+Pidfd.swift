#if canImport(Glibc)
import Glibc
#endif

/// The pidfd options of an AF_UNIX socket (Linux 6.5+), which name processes rather than pids:
/// the process at the other end of a connection (SO_PEERPIDFD), and the process that sent each
/// record (SO_PASSPIDFD, which makes the kernel attach an SCM_PIDFD to every record read).
/// Their numbers are not in every libc's headers yet.
extension SeqPacketSocket {
    static let passPidfdOption: Int32 = 76
    static let peerPidfdOption: Int32 = 77

    /// SO_PEERPIDFD: the process the kernel recorded at connect(2) — for a socket returned by
    /// accept(2), the process that connected; for a socketpair end, the process that made the
    /// pair (this one, which is why a socketpair's senders are pinned per record instead).
    /// Throws ENOPROTOOPT before Linux 6.5, ESRCH when that process is gone and the kernel kept
    /// nothing to name it by (before 6.16), EMFILE/ENFILE when out of descriptors.
    func peerProcess() throws(Errno) -> ProcessDescriptor {
        if let fault = KernelFault.injected(into: .peerPidfd) { throw fault }
        var fd: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try syscallRetryingEINTR { getsockopt(descriptor.rawValue, SOL_SOCKET, Self.peerPidfdOption, &fd, &length) }
        return ProcessDescriptor(adopting: FileDescriptor(rawValue: fd))
    }

    /// SO_PASSPIDFD on or off: with it on, every record read comes with a pidfd of the process
    /// that sent it (`ReceiveBatch.Record.process`) — a descriptor installed, and closed by the
    /// reader, per record. It applies to the records read after the call, whenever they were
    /// sent. Throws ENOPROTOOPT before Linux 6.5.
    func setPassProcess(_ on: Bool) throws(Errno) {
        if let fault = KernelFault.injected(into: .passPidfd) { throw fault }
        var value: Int32 = on ? 1 : 0
        _ = try syscallRetryingEINTR {
            setsockopt(descriptor.rawValue, SOL_SOCKET, Self.passPidfdOption, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }
}

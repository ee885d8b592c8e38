#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A pidfd: a descriptor that names one process for its whole life (pidfd_open(2), or the
/// kernel's SO_PEERPIDFD and SCM_PIDFD). Unlike a pid, it never comes to name another process:
/// a signal sent through it after the process was reaped fails with ESRCH instead of reaching
/// whoever was given the number next. Pollable: readable once the process has exited.
///
/// A value type: whoever made or received it closes it exactly once.
struct ProcessDescriptor: Sendable, Hashable {
    let descriptor: FileDescriptor

    /// What poll(2) says of the process now.
    enum Liveness: Sendable, Equatable {
        case running
        /// Exited, and not yet reaped by its parent: it still holds its pid. Kernels before 6.9
        /// report a reaped process this way too (see `holdsItsPid`).
        case exited
        /// Exited and reaped: its pid may belong to another process by now.
        case reaped
    }

    init(adopting descriptor: FileDescriptor) {
        self.descriptor = descriptor
    }

    /// pidfd_open(2) of `pid` (close-on-exec). Throws ESRCH when no process has that pid (or it
    /// names a thread that is not a thread-group leader: EINVAL), EMFILE/ENFILE when out of
    /// descriptors, ENOSYS before Linux 5.3.
    /// Whether any process holds `pid` now — running, or exited and not yet reaped — in this
    /// process's pid namespace: kill(2) with signal 0 fails with ESRCH only when none does.
    static func isHeld(_ pid: pid_t) -> Bool {
        kill(pid, 0) == 0 || errno != ESRCH
    }

    static func open(pid: pid_t) throws(Errno) -> ProcessDescriptor {
        if let fault = KernelFault.injected(into: .pidfdOpen) { throw fault }
        let fd = try syscallRetryingEINTR { crlk_pidfd_open(pid) }
        return ProcessDescriptor(adopting: FileDescriptor(rawValue: fd))
    }

    /// One poll(2), without waiting.
    var liveness: Liveness {
        var entry = pollfd(fd: descriptor.rawValue, events: Int16(POLLIN), revents: 0)
        while poll(&entry, 1, 0) < 0 && errno == EINTR {}
        if entry.revents & Int16(POLLHUP) != 0 { return .reaped }
        return entry.revents & Int16(POLLIN) != 0 ? .exited : .running
    }

    /// Whether the process still holds its pid now — running, or exited and not yet reaped — so
    /// that no other process can have been given it. Where the kernel does not tell exited from
    /// reaped (before 6.9), only a running process is known to. One poll(2).
    var holdsItsPid: Bool {
        switch liveness {
        case .running: true
        case .exited: Self.kernelReportsReaping
        case .reaped: false
        }
    }

    /// pidfd_send_signal(2). Throws ESRCH once the process has been reaped, EPERM when this
    /// process may not signal it, EINVAL for a signal number that is not one.
    func send(signal: Int32) throws(Errno) {
        _ = try syscallRetryingEINTR { crlk_pidfd_send_signal(descriptor.rawValue, signal) }
    }

    /// What tells two pidfds of one process from pidfds of two: on pidfs (Linux 6.9+) each
    /// process has its own inode, whatever descriptor or system call named it. Nil before 6.9,
    /// where every pidfd shares one anonymous inode.
    var identity: UInt64? {
        guard Self.kernelReportsReaping else { return nil }
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0 else { return nil }
        return UInt64(status.st_ino)
    }

    func close() { descriptor.close() }

    /// Whether pidfds live on pidfs (Linux 6.9+), whose poll(2) also reports a reaped process
    /// (POLLHUP) and whose inodes name processes. Asked once, of this process's own pidfd.
    static let kernelReportsReaping: Bool = {
        let fd = crlk_pidfd_open(getpid())
        guard fd >= 0 else { return false }
        defer { Glibc.close(fd) }
        var info = statfs()
        return fstatfs(fd, &info) == 0 && UInt32(truncatingIfNeeded: info.f_type) == pidfsMagic
    }()

    /// PID_FS_MAGIC of linux/magic.h ("PIDF").
    private static let pidfsMagic: UInt32 = 0x5049_4446
}

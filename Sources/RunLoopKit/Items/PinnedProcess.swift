#if canImport(Glibc)
import Glibc
#endif

/// One process, held by a pidfd for its whole life: unlike its pid, which the kernel hands to
/// another process once this one has exited and been reaped, a pinned process never comes to
/// name another. Ask whether it is still running, signal it, or watch it exit with a
/// `ProcessExitSource`, without the risk of acting on whoever was given its number next.
///
/// A message from another process says which process sent it (`message.sender?.process`); a
/// process of your own choosing is pinned with `init(pid:)`. Two values are equal when they
/// name the same process, whichever way each was made. Linux 6.9+ tells processes apart by
/// their pidfd; before it, as systemd's `pidref_equal` does, by their pid.
public final class PinnedProcess: Sendable, Hashable, CustomStringConvertible {
    /// The process's id in this process's pid namespace, as it was when it was pinned (0 for a
    /// process the namespace cannot see). Once the process has been reaped, the number may
    /// belong to another process: act through this object, not through the number. Any thread; free.
    public let pid: Int32
    private let process: ProcessDescriptor
    private let identity: UInt64?

    /// Pins the process that has `pid` now (pidfd_open(2)). Throws `.processNotFound(pid)` when
    /// there is none (it exited and was reaped, or never existed) or it cannot be pinned (a
    /// thread id rather than a process's, a kernel before 5.3), and `.resourceExhausted` when this
    /// process is out of descriptors. The pid is looked up once, now: pin a process while you know
    /// it holds the pid (a child you have not reaped, the sender of a message you are handling),
    /// or the process you pin may already be another. Any thread; a pidfd_open(2) and an fstat(2),
    /// and the descriptor it holds until it is deallocated.
    public init(pid: Int32) throws(PortError) {
        do {
            process = try ProcessDescriptor.open(pid: pid)
        } catch {
            throw error.isResourceExhaustion ? .resourceExhausted(errno: error.rawValue) : .processNotFound(pid)
        }
        self.pid = pid
        identity = process.identity
    }

    /// Takes ownership of a pidfd the kernel gave (SO_PEERPIDFD, SCM_PIDFD) for the process that
    /// had `pid` when it connected or sent.
    init(adopting process: ProcessDescriptor, pid: Int32) {
        self.process = process
        self.pid = pid
        identity = process.identity
    }

    deinit {
        process.close()
    }

    /// False once the process has exited (whether or not its parent has reaped it yet).
    /// Any thread; one poll(2).
    public var isRunning: Bool { process.liveness == .running }

    /// The pidfd, owned by this object and closed when it is deallocated: poll it, or pass it to
    /// pidfd_send_signal(2), pidfd_getfd(2) or setns(2). Do not close it. Any thread; free.
    public var descriptor: Int32 { process.descriptor.rawValue }

    /// Sends `signal` to this process (pidfd_send_signal(2)), never to another that was given
    /// its pid. Throws `.processNotFound(pid)` once the process has been reaped and
    /// `.accessDenied` when this process may not signal it. Signal 0 checks that it could be
    /// signalled and sends nothing. A number that is not a signal is a precondition failure.
    /// Any thread; one system call.
    public func sendSignal(_ signal: Int32) throws(PortError) {
        do {
            try process.send(signal: signal)
        } catch {
            switch error.rawValue {
            case EPERM: throw .accessDenied
            case EINVAL: preconditionFailure("PinnedProcess.sendSignal(\(signal)): \(signal) is not a signal number")
            default: throw .processNotFound(pid)
            }
        }
    }

    /// Whether the process still holds its pid, so that nothing another process sent can carry
    /// it: running, or exited but not yet reaped (where the kernel tells the two apart).
    var holdsItsPid: Bool { process.holdsItsPid }

    /// Whether the process lives in a pid namespace below this process's (or outside its view),
    /// so that a process of a user namespace made without privilege may have named it in
    /// SCM_CREDENTIALS (§3.61). False where the kernel does not say. Any thread; reads
    /// /proc/self/fdinfo once per call.
    var livesInNestedPidNamespace: Bool { (process.pidNamespaceDepth ?? 0) > 0 }

    /// Equal when both name the same process. Any thread; free.
    public static func == (lhs: PinnedProcess, rhs: PinnedProcess) -> Bool {
        if lhs === rhs { return true }
        if let left = lhs.identity, let right = rhs.identity { return left == right }
        return lhs.pid == rhs.pid
    }

    /// Hashes the process's pid: one process has one pid, so equal values hash alike (a process
    /// that was given the pid of another only shares its bucket). Any thread; free.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(pid)
    }

    /// "process 1234 (running)", for logs. Any thread; one poll(2) and the string.
    public var description: String {
        let state = switch process.liveness {
        case .running: "running"
        case .exited: "exited"
        case .reaped: "reaped"
        }
        return "process \(pid) (\(state))"
    }
}

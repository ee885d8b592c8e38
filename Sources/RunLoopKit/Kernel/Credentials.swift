#if canImport(Glibc)
import Glibc
#endif

/// A process's identity as the kernel reports it over an AF_UNIX socket: never what the peer
/// says about itself. SO_PEERCRED gives the effective uid and gid of the process that called
/// connect(2); SCM_CREDENTIALS (SO_PASSCRED) the real uid and gid of each record's sender, and
/// its pid — which a process may choose among those it could signal with CAP_SYS_ADMIN over its
/// pid namespace, so also, from a user and pid namespace it made, among its own descendants.
struct Credentials: Hashable, Sendable {
    var pid: pid_t
    var uid: uid_t
    var gid: gid_t

    /// This process: its pid and effective uid and gid, as SO_PEERCRED reports them (SCM_CREDENTIALS
    /// carry the real ids, the same unless the process runs a setuid program).
    static var ofThisProcess: Credentials { Credentials(pid: getpid(), uid: geteuid(), gid: getegid()) }
}

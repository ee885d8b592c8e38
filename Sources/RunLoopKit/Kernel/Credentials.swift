#if canImport(Glibc)
import Glibc
#endif

/// A process's identity as the kernel reports it over an AF_UNIX socket (SO_PEERCRED, or
/// SCM_CREDENTIALS with SO_PASSCRED): never what the peer says about itself.
struct Credentials: Hashable, Sendable {
    var pid: pid_t
    var uid: uid_t
    var gid: gid_t

    /// This process: its pid and effective uid and gid, as the kernel would report them.
    static var ofThisProcess: Credentials { Credentials(pid: getpid(), uid: geteuid(), gid: getegid()) }
}

#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Lets `runloopctl` see inside this process: its loops, their ports and statistics
/// (`runloopctl status`) and the messages its ports send and deliver (`runloopctl monitor`) —
/// what busctl and dumpsys show of a daemon, answered by the process itself since named ports
/// have no broker. See <doc:SeeingInsideADaemon>.
///
/// Off by default, and then it costs nothing: no thread, no descriptor, no name (Guarantees
/// §3.44). On, the process listens at an endpoint of its own (the abstract AF_UNIX address
/// `runloopkit-introspection/<pid>`, Protocols/introspection.md) served by one thread of its
/// own, and answers only processes of its effective uid, or root, as the kernel reports them
/// (§3.45). `runloopctl list` needs none of this: it reads the published names from the kernel.
///
/// Setting `RUNLOOPKIT_INTROSPECTION=1` in the environment enables it when the process makes
/// its first run loop.
public enum Introspection {
    private static let server = Locked<IntrospectionServer?>(nil)
    private static let environmentChecked = Atomic<Bool>(false)

    /// Starts answering `runloopctl`. Idempotent. Throws `.nameInUse` when another socket holds
    /// this process's endpoint address (a squatter: the abstract namespace has no permissions),
    /// `.resourceExhausted` when out of descriptors or threads.
    ///
    /// Any thread. Costs a listening socket and a ``ResidentThread`` for as long as it is on; the
    /// loops pay nothing until a monitor attaches (then a copy of each message's header).
    public static func enable() throws(PortError) {
        try server.withLock { (server: inout IntrospectionServer?) throws(PortError) in
            guard server == nil else { return }
            server = try IntrospectionServer()
        }
    }

    /// Stops answering: closes the endpoint and every attached `runloopctl` (monitors and traces
    /// detach, leaving nothing behind) and joins the thread. Idempotent. Any thread but the
    /// introspection thread itself; joins that thread.
    public static func disable() {
        let stopping = server.withLock { server in
            defer { server = nil }
            return server
        }
        stopping?.stop()
    }

    /// Whether the process answers `runloopctl`. Any thread; a lock.
    public static var isEnabled: Bool { server.withLock { $0 != nil } }

    /// Enables introspection when the environment asks for it with RUNLOOPKIT_INTROSPECTION=1:
    /// checked once, when the process makes its first run loop. A failure is reported on stderr
    /// (a daemon started this way has nobody else to tell). Any thread.
    static func enableFromEnvironmentOnce() {
        guard !environmentChecked.exchange(true, ordering: .relaxed) else { return }
        guard let value = getenv("RUNLOOPKIT_INTROSPECTION"), String(cString: value) == "1" else { return }
        do {
            try enable()
        } catch {
            let line = Array("RunLoopKit: RUNLOOPKIT_INTROSPECTION=1, but introspection could not start: \(error)\n".utf8)
            _ = line.withUnsafeBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
        }
    }
}

/// Ports that refuse descriptors (§3.34). A port component travels between processes
/// as a descriptor, and any holder of a send right may send some: the receiving process holds
/// each until the message is gone, up to its descriptor limit. A port that has no use for them
/// says so, and then no descriptor reaches it.
extension MessagePort {
    /// Whether messages with port components (across processes: with descriptors) reach this
    /// port. True by default. Set to false, a port refuses them from then on:
    /// - an in-process `send` with a port component throws `.portsRefused` (a reply port given as
    ///   `from:` is still taken: in-process it is no descriptor);
    /// - through a send right, the kernel refuses every frame with descriptors (SO_PASSRIGHTS,
    ///   Linux 6.16+): the sender's `send` throws `.portsRefused`. A reply port is a descriptor
    ///   there, so such a port takes no requests from other processes. On older kernels, and for
    ///   frames already queued when the port began to refuse, the owner drops each such frame,
    ///   closes its descriptors and reports `.portsRefused` through its transport error handler;
    ///   the connection stays open for frames without descriptors.
    ///
    /// Only a local port refuses: setting it on a proxy is a precondition failure (set it where
    /// the port is owned). Any thread; a lock, and a setsockopt(2) per open connection.
    public var acceptsPortComponents: Bool {
        get { lock.withLock { !state.refusesPortComponents } }
        set {
            precondition(!isProxy, """
                MessagePort.acceptsPortComponents was set on a proxy (\(self)): only the process that \
                owns a port decides what reaches it; set it on the local port there.
                """)
            lock.withLock {
                guard state.refusesPortComponents == newValue else { return }
                state.refusesPortComponents = !newValue
                // Under the lock: the loop thread closes a connection only after taking it out of
                // `sockets` under the lock, so none of these is closed meanwhile.
                guard let connections = state.connections else { return }
                for connection in connections.sockets.values { connection.acceptDescriptors(newValue) }
            }
        }
    }

    /// `.portsRefused` when `components` hold a port and this port refuses them. The send paths
    /// call it for messages stored as a components array only, so the usual message (one Data
    /// component) never reaches it.
    @inline(never)
    func checkAcceptsPortComponents(_ components: [Message.Component]) throws(PortError) {
        guard components.contains(where: { if case .port = $0 { true } else { false } }) else { return }
        if lock.withLock({ state.refusesPortComponents }) { throw .portsRefused }
    }
}

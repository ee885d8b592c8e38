#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit
import RunLoopKitSystemd

/// The main thread's part: starts the shards and the network thread, tells systemd it is ready
/// (and pings its watchdog from the network thread's loop, so that a wedged network thread is
/// what gets the service restarted), and on SIGTERM or SIGINT drains: no new connections or
/// commands, every command already read answered and written, then every thread stopped and
/// exit status 0. Everything here runs on the main thread (the signal source is on its loop),
/// which is what makes sharing the class with that source's handler safe.
final class Daemon: @unchecked Sendable {
    private let configuration: Configuration
    private let notifier = SystemdNotifier()
    private let watchdog = WatchdogKeepAlive()
    private var shards: [Shard] = []
    private var network: NetworkServer?
    private var stopping = false

    init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// Serves until a signal's drain is over; returns the exit status.
    func run() throws -> Int32 {
        Malloc.fixMmapThreshold()   // before any thread runs
        raiseDescriptorLimit()
        // Under socket activation systemd bound the port (and clients may already wait in its
        // backlog); otherwise the daemon binds it.
        let listener = try SocketActivation.listeningSocket(named: "kv-daemon").map(Listener.adopt)
            ?? Listener.bind(port: configuration.port)
        shards = try (0..<configuration.shards).map { index throws(PortError) in try Shard(index: index) }
        let network = try NetworkServer(
            listener: listener, shards: shards,
            limits: .init(maxClients: configuration.maxClients, maxBulkLength: configuration.maxBulkBytes,
                          maxRequestBytes: configuration.maxRequestBytes, maxOutputBytes: configuration.maxOutputBytes,
                          maxPipeline: configuration.maxPipeline),
            settings: configuration.settings(boundPort: listener.port))
        self.network = network
        let main = ThreadRunLoop.main
        let signals = try SignalSource(signals: [SIGTERM, SIGINT]) { [unowned self] _, _ in beginShutdown() }
        signals.add(to: main, forMode: .default)
        watchdog.add(to: network.thread.runLoop)

        let serving = "127.0.0.1:\(listener.port), \(configuration.shards) shard(s)"
        notifier.ready(status: "Serving \(serving)")
        say("ready port=\(listener.port) shards=\(configuration.shards)")

        main.run()   // until the drain is over (or its timeout)

        watchdog.invalidate()
        signals.invalidate()
        let cut = network.stop()
        shards.forEach { $0.stop() }
        say("stopped: \(network.repliesQueued) replies, \(cut) connection(s) closed with replies unwritten")
        return 0
    }

    /// SIGTERM, SIGINT: STOPPING=1, then the network thread drains; the main loop stops when it
    /// has, or after the drain timeout (clients that never read their replies).
    private func beginShutdown() {
        guard !stopping, let network else { return }
        stopping = true
        notifier.stopping(status: "Stopping: answering the commands already read")
        say("stopping")
        let main = ThreadRunLoop.main
        do {
            try network.thread.perform { network.drain { main.stop() } }
        } catch {
            main.stop()
        }
        main.add(RunLoopTimer(fireAt: .now + configuration.drainTimeout) { _ in
            log("drain timed out: closing the connections left")
            main.stop()
        }, forMode: .default)
    }

    /// Raises the soft limit on open descriptors to what `maxClients` connections need (as
    /// Redis does at start-up), up to the hard limit.
    private func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return }
        let wanted = rlim_t(configuration.maxClients + 64)
        guard limit.rlim_cur < wanted else { return }
        limit.rlim_cur = min(wanted, limit.rlim_max)
        if setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) != 0 || limit.rlim_cur < wanted {
            log("only \(limit.rlim_cur) descriptors available for \(configuration.maxClients) clients")
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import ExampleWire
import RunLoopKit
import RunLoopKitSystemd
import Synchronization

/// The main thread's part: publishes the service port under its name (or on the socket systemd
/// passed), hands each client request round-robin to a worker with the client's reply port,
/// counts the requests in flight, and handles SIGTERM (unpublish, drain, stop), SIGHUP
/// (reload), the watchdog and STATUS=. It knows its clients as processes, pinned by the kernel
/// with each request (`sender.process`, which pid reuse cannot turn into another process):
/// it logs a client when its first request comes (and each request with `log_requests = yes`),
/// and watches it with a ProcessExitSource, which logs what it asked for once it exits. Every
/// callback is scheduled on the main loop, so all run on the main thread; the state is in a
/// (never contended) Mutex so the class is honestly Sendable.
///
/// Loop health: every loop logs its slow callouts, a `HangWatch` logs a loop stuck in one pass,
/// and the watchdog pings only while the main loop and both workers make progress, so a wedged
/// worker gets the service restarted.
final class Daemon: Sendable {
    private struct State {
        var configuration: Configuration
        var nextID: UInt64 = 1
        var inFlight: Set<UInt64> = []
        var answered = 0, refused = 0
        var stopping = false
        var statusTimer: RunLoopTimer?
        /// The client processes that sent requests and have not exited, with what they asked.
        var clients: [PinnedProcess: Client] = [:]
    }

    private struct Client {
        let exit: ProcessExitSource
        var requests = 0
    }

    private let loop = ThreadRunLoop.main
    private let configurationPath: String?
    private let notifier = SystemdNotifier()
    private let watchdog: WatchdogKeepAlive
    private let service: MessagePort
    private let done: MessagePort
    private let workers: [Worker]
    private let state: Mutex<State>
    /// Also serves the service port elsewhere once it is published (the gRPC bridge of
    /// `--grpc`): called with the port and its name; returns how to stop.
    private let alsoServe: (@Sendable (MessagePort, String) throws -> @Sendable () -> Void)?

    init(configurationPath: String?,
         alsoServe: (@Sendable (MessagePort, String) throws -> @Sendable () -> Void)? = nil) throws {
        self.alsoServe = alsoServe
        self.configurationPath = configurationPath
        state = Mutex(State(configuration: try Configuration.load(path: configurationPath)))
        service = try MessagePort(queueLimit: 1024)
        done = try MessagePort(queueLimit: 1024)
        let done = done
        workers = try (1...2).map { n throws(PortError) in try Worker(name: "worker-\(n)", done: done) }
        watchdog = WatchdogKeepAlive(watching: [loop] + workers.map(\.thread.runLoop)) { stuck in
            log("watchdog: WATCHDOG=1 withheld, no progress on \(stuck.map(\.threadName).joined(separator: ", "))")
        }
    }

    /// Serves until SIGTERM has been handled; returns the exit status.
    func run() throws -> Int32 {
        let health = state.withLock { ($0.configuration.slowCallout, $0.configuration.hangThreshold) }
        let loops = [loop] + workers.map(\.thread.runLoop)
        for watched in loops {
            watched.setSlowCalloutHandler(threshold: health.0) { callout in
                log("slow callout on \(watched.threadName): \(callout)")
            }
        }
        let hangs = HangWatch(loops: loops, threshold: health.1) { stuck, callout in
            log("hang: \(stuck.threadName) stuck in \(callout.map(String.init(describing:)) ?? "its pass, between callouts")")
        }
        defer { hangs.stop() }
        service.label = "service"
        done.label = "done"
        service.setHandler { [self] message in accept(message) }
        // A refused frame, handshake or connection, with who sent it.
        service.setTransportReportHandler { report in log("refused: \(report)") }
        done.setHandler { [self] message in collect(message) }
        loop.add(service, forMode: .default)
        loop.add(done, forMode: .default)
        let signals = try SignalSource(signals: [SIGTERM, SIGHUP]) { [self] _, signo in
            signo == SIGTERM ? beginShutdown() : reload()
        }
        signals.label = "signals"
        signals.add(to: loop, forMode: .default)
        watchdog.add(to: loop)
        let configuration = state.withLock { $0.configuration }
        // Under socket activation systemd bound the name before this process started, and
        // clients may already wait in its backlog; otherwise the port binds it now.
        try service.publish(as: configuration.name, access: configuration.access,
                            listeningSocket: SocketActivation.listeningSocket(named: configuration.name))
        let stopServing = try alsoServe?(service, configuration.name)
        defer { stopServing?() }
        scheduleStatus()
        notifier.ready(status: statusLine())   // the workers are up and the name is published
        say("ready")

        loop.run()   // until the drain is over

        workers.forEach { $0.stop() }
        [signals.invalidate, watchdog.invalidate, service.invalidate, done.invalidate].forEach { $0() }
        state.withLock { s in s.clients.values.map(\.exit) }.forEach { $0.invalidate() }
        let (answered, unanswered) = state.withLock { s in
            s.statusTimer?.invalidate()
            return (s.answered, s.inFlight.count)
        }
        say("stopped: \(answered) answered, \(unanswered) unanswered")
        return 0
    }

    /// A client's request: to a worker, or refused while stopping. Never blocks the main loop:
    /// a worker whose queue is full refuses the request.
    private func accept(_ message: MessagePort.Message) {
        guard let request = Wire.decode(message, msgid: Wire.request, count: 2), let client = message.replyPort else {
            return log("malformed request \(message.msgid) from \(message.sender.map(String.init(describing:)) ?? "this process") dropped")
        }
        let (key, rounds) = (request[0], request[1])
        let (assigned, logRequests) = state.withLock { s -> ((UInt64, Worker)?, Bool) in
            guard !s.stopping else { return (nil, s.configuration.logRequests) }
            defer { s.nextID += 1 }
            s.inFlight.insert(s.nextID)
            return ((s.nextID, workers[Int(s.nextID % UInt64(workers.count))]), s.configuration.logRequests)
        }
        let sender = message.sender
        watch(sender)
        if logRequests {
            log("request \(assigned?.0.description ?? "refused") (key \(key)) from \(Self.describe(sender))")
        }
        guard let (id, worker) = assigned else { return refuse(key, client) }
        do {
            try worker.inbox.send(msgid: Wire.request, components: [Wire.encode(id, key, rounds), .port(client)],
                                  before: .now)
        } catch {
            state.withLock { s in _ = s.inFlight.remove(id) }
            refuse(key, client)
        }
    }

    /// Counts a request of the client process that sent it; the first one logs the client and
    /// starts watching its exit.
    private func watch(_ sender: MessagePort.Sender?) {
        guard let process = sender?.process else { return }
        let known = state.withLock { s -> Bool in
            s.clients[process]?.requests += 1
            return s.clients[process] != nil
        }
        guard !known else { return }
        let exit = ProcessExitSource(process: process) { [self] _ in clientExited(process) }
        exit.label = "client \(process.pid)"
        state.withLock { $0.clients[process] = Client(exit: exit, requests: 1) }
        loop.add(exit, forMode: .default)
        log("client \(Self.describe(sender))")
    }

    private func clientExited(_ process: PinnedProcess) {
        guard let client = state.withLock({ $0.clients.removeValue(forKey: process) }) else { return }
        log("client process \(process.pid) exited after \(client.requests) request(s)")
    }

    /// "pid 12, uid 1000, gid 1000 (process 12 (running))", or "this process" for none.
    private static func describe(_ sender: MessagePort.Sender?) -> String {
        guard let sender else { return "this process" }
        return "\(sender) (\(sender.process.map(String.init(describing:)) ?? "not pinned"))"
    }

    private func refuse(_ key: UInt64, _ client: MessagePort) {
        state.withLock { $0.refused += 1 }
        try? client.send(msgid: Wire.refused, components: [Wire.encode(key)], before: .now)
    }

    private func collect(_ message: MessagePort.Message) {
        guard let report = Wire.decode(message, msgid: Wire.done, count: 2) else {
            return log("malformed report \(message.msgid) dropped")
        }
        let drained = state.withLock { s in
            if s.inFlight.remove(report[0]) != nil && report[1] == 1 { s.answered += 1 }
            return s.stopping && s.inFlight.isEmpty
        }
        if drained { loop.stop() }
    }

    private func statusLine() -> String {
        state.withLock { s in
            "\(s.stopping ? "Stopping" : "Serving"): \(s.answered) answered, \(s.inFlight.count) in flight, \(s.refused) refused"
        }
    }

    /// SIGTERM: unpublish (new clients find no name), STOPPING=1, wait for the requests in
    /// flight (reporting those still unanswered after the drain timeout), then stop the loop.
    private func beginShutdown() {
        guard let (pending, drainTimeout) = state.withLock({ s -> (Int, Duration)? in
            guard !s.stopping else { return nil }
            s.stopping = true
            return (s.inFlight.count, s.configuration.drainTimeout)
        }) else { return }
        service.unpublish()
        notifier.stopping(status: "Stopping: waiting for \(pending) request(s)")
        say("stopping")
        guard pending > 0 else { return loop.stop() }
        loop.add(RunLoopTimer(fireAt: .now + drainTimeout) { [self] _ in
            for id in state.withLock({ $0.inFlight.sorted() }) { log("request \(id) unanswered at shutdown") }
            loop.stop()
        }, forMode: .default)
    }

    /// SIGHUP: RELOADING=1, re-read the configuration (keeping the old one if that fails),
    /// reschedule the status timer, READY=1.
    private func reload() {
        guard !state.withLock({ $0.stopping }) else { return }
        notifier.reloading(status: "Reloading configuration")
        do {
            var configuration = try Configuration.load(path: configurationPath)
            state.withLock { s in
                (configuration.name, configuration.access) = (s.configuration.name, s.configuration.access)
                s.configuration = configuration
            }
            log("reloaded: \(configuration)")
        } catch {
            log("reload failed, keeping the previous configuration: \(error)")
        }
        scheduleStatus()
        notifier.ready(status: statusLine())
        say("reloaded")
    }

    /// (Re)creates the status timer from the current configuration.
    private func scheduleStatus() {
        let interval = state.withLock { $0.configuration.statusInterval }
        let timer = RunLoopTimer(interval: interval, repeats: true) { [self] _ in notifier.status(statusLine()) }
        timer.label = "status"
        state.withLock { s in defer { s.statusTimer = timer }; return s.statusTimer }?.invalidate()
        loop.add(timer, forMode: .default)
    }
}

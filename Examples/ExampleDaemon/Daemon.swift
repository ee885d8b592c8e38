#if canImport(Glibc)
import Glibc
#endif
import ExampleWire
import RunLoopKit
import RunLoopKitDistributed
import RunLoopKitSystemd
import Synchronization

/// The main thread's part: publishes the service port under its name (or on the socket systemd
/// passed) and the same service as a distributed actor (`ExampleService`, answered on the
/// cooperative pool), hands each client request round-robin to a worker with the client's reply port,
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
    /// What became of each request: the summary and STATUS= read it.
    private let ledger = Ledger()
    /// Publishes the service as a distributed actor too (`ExampleService`).
    private let actors = PortActorSystem()
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
        // Never full, so a worker's report never waits: at most 2 × 512 requests are in flight
        // (per worker, the batch its loop took and a full inbox of 256).
        done = try MessagePort(queueLimit: 2048)
        let done = done
        let ledger = ledger
        workers = try (1...2).map { n throws(PortError) in try Worker(name: "worker-\(n)", done: done, ledger: ledger) }
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
        // Under socket activation systemd bound the names before this process started (both:
        // a name left for the daemon to bind could be taken first by any process of its
        // scope), and clients may already wait in a backlog; otherwise the daemon binds them.
        let actorName = Wire.actorName(for: configuration.name)
        let activated = ActivationSockets.take(names: [configuration.name, actorName])
        try service.publish(as: configuration.name, access: configuration.access,
                            listeningSocket: activated[configuration.name])
        try actors.publish(ExampleService(actorSystem: actors, maxRounds: configuration.maxRounds), as: actorName,
                           access: configuration.access, listeningSocket: activated[actorName])
        defer { actors.shutdown() }
        let stopServing = try alsoServe?(service, configuration.name)
        defer { stopServing?() }
        scheduleStatus()
        notifier.ready(status: statusLine())   // the workers are up and the name is published
        say("ready")

        loop.run()   // until the drain is over

        // A worker still holding requests refuses them now rather than working on them; its
        // thread then stops after the message in hand. Only then are the counts final.
        ledger.abandon()
        service.invalidate()   // no request is read after the counts
        workers.forEach { $0.stop() }
        [signals.invalidate, watchdog.invalidate, done.invalidate].forEach { $0() }
        state.withLock { s in s.clients.values.map(\.exit) }.forEach { $0.invalidate() }
        state.withLock { $0.statusTimer?.invalidate() }
        let counts = ledger.snapshot
        if !counts.inFlight.isEmpty {
            // One line, not one per request: a flood's worth of lines could fill the journal
            // (or a pipe nobody reads at that moment) and hold up the exit.
            let ids = counts.inFlight.sorted()
            log("\(ids.count) request(s) unanswered at shutdown: \(ids.prefix(10).map(String.init).joined(separator: ", "))"
                + (ids.count > 10 ? ", …" : ""))
        }
        say("stopped: \(counts.answered) answered, \(counts.refusedInAll) refused, \(counts.dropped) dropped, "
            + "\(counts.inFlight.count) unanswered")
        return 0
    }

    /// A client's request: to a worker, or refused with its reason — the daemon is stopping,
    /// the worker's queue is full, or `rounds` is above `max_rounds` (refused, not worked on:
    /// one request must not tie up a worker for as long as its client likes). Never blocks the
    /// main loop.
    private func accept(_ message: MessagePort.Message) {
        guard let request = Wire.decode(message, msgid: Wire.request, count: 2), let client = message.replyPort else {
            return log("malformed request \(message.msgid) from \(message.sender.map(String.init(describing:)) ?? "this process") dropped")
        }
        let (key, rounds) = (request[0], request[1])
        let (admitted, refusal, logRequests) = state.withLock { s -> ((UInt64, Worker)?, Wire.Refusal?, Bool) in
            if s.stopping { return (nil, .stopping, s.configuration.logRequests) }
            if rounds > s.configuration.maxRounds { return (nil, .tooManyRounds, s.configuration.logRequests) }
            defer { s.nextID += 1 }
            return ((s.nextID, workers[Int(s.nextID % UInt64(workers.count))]), nil, s.configuration.logRequests)
        }
        let sender = message.sender
        watch(sender)
        if logRequests {
            log("request \(admitted.map { $0.0.description } ?? "refused (\(refusal!))") (key \(key)) from \(Self.describe(sender))")
        }
        guard let (id, worker) = admitted else { return refuse(key, client, refusal!) }
        ledger.admit(id)
        do {
            try worker.inbox.send(msgid: Wire.request, components: [Wire.encode(id, key, rounds), .port(client)],
                                  before: .now)
        } catch {
            ledger.withdraw(id)
            refuse(key, client, .busy)
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

    /// Refuses a request not admitted, saying why; queued at once or dropped, as a reply.
    private func refuse(_ key: UInt64, _ client: MessagePort, _ reason: Wire.Refusal) {
        do {
            try client.send(msgid: Wire.refused, components: [Wire.encode(key, reason.rawValue)], before: .now)
            ledger.settle(nil, .refused(reason))
        } catch {
            ledger.settle(nil, .dropped)
        }
    }

    /// A worker settled a request: once stopping, the last one ends the drain.
    private func collect(_ message: MessagePort.Message) {
        guard Wire.decode(message, msgid: Wire.done, count: 1) != nil else {
            return log("malformed report \(message.msgid) dropped")
        }
        if state.withLock({ $0.stopping }) && ledger.inFlightCount == 0 { loop.stop() }
    }

    private func statusLine() -> String {
        let stopping = state.withLock { $0.stopping }
        let c = ledger.snapshot
        return "\(stopping ? "Stopping" : "Serving"): \(c.answered) answered, \(c.inFlight.count) in flight, "
            + "\(c.refusedInAll) refused, \(c.dropped) dropped"
    }

    /// SIGTERM: unpublish (new clients find no name), STOPPING=1, wait for the requests in
    /// flight up to the drain timeout, then stop the loop. What the workers still hold then is
    /// refused, and a request under way stops at its next check (`run()`), so the whole
    /// shutdown takes the drain timeout and a few milliseconds, whatever the load: set
    /// `TimeoutStopSec=` above `drain_timeout_ms`.
    private func beginShutdown() {
        guard let drainTimeout = state.withLock({ s -> Duration? in
            guard !s.stopping else { return nil }
            s.stopping = true
            return s.configuration.drainTimeout
        }) else { return }
        let pending = ledger.inFlightCount
        service.unpublish()
        actors.unpublish(Wire.actorName(for: state.withLock { $0.configuration.name }))
        notifier.stopping(status: "Stopping: waiting for \(pending) request(s)")
        say("stopping")
        guard pending > 0 else { return loop.stop() }
        loop.add(RunLoopTimer(fireAt: .now + drainTimeout) { [self] _ in
            log("drain timeout: \(ledger.inFlightCount) request(s) still in flight are refused")
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

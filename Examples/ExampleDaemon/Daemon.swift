#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit
import RunLoopKitSystemd
import Synchronization

/// The main thread's part: accepts requests, hands them round-robin to the workers with
/// `replies` as the `from:` port, collects the answers, and handles SIGTERM (drain, stop),
/// SIGHUP (reload), the watchdog and STATUS=. Every callback is scheduled on the main loop,
/// so all run on the main thread; the state is in a (never contended) Mutex so the class
/// is honestly Sendable.
final class Daemon: Sendable {
    private struct State {
        var configuration: Configuration
        var nextID: UInt64 = 1
        var inFlight: Set<UInt64> = []
        var answered = 0, refused = 0
        var stopping = false
        var timers: [RunLoopTimer] = []   // the request and status timers
    }

    private let loop = ThreadRunLoop.main
    private let configurationPath: String?
    private let notifier = SystemdNotifier()
    private let watchdog = WatchdogKeepAlive()
    private let replies: MessagePort
    private let workers: [Worker]
    private let state: Mutex<State>

    init(configurationPath: String?) throws {
        self.configurationPath = configurationPath
        state = Mutex(State(configuration: try Configuration.load(path: configurationPath)))
        replies = try MessagePort(queueLimit: 1024)
        workers = try (1...2).map { n throws(PortError) in try Worker(name: "worker-\(n)") }
    }

    /// Serves until SIGTERM has been handled; returns the exit status.
    func run() throws -> Int32 {
        replies.setHandler { [self] message in collect(message) }
        loop.add(replies, forMode: .default)
        let signals = try SignalSource(signals: [SIGTERM, SIGHUP]) { [self] _, signo in
            signo == SIGTERM ? beginShutdown() : reload()
        }
        signals.add(to: loop, forMode: .default)
        watchdog.add(to: loop)
        scheduleTimers()
        notifier.ready(status: statusLine())   // the workers are up: READY=1
        say("ready")

        loop.run()   // until the drain is over

        workers.forEach { $0.stop() }
        [signals.invalidate, watchdog.invalidate, replies.invalidate].forEach { $0() }
        let (answered, unanswered) = state.withLock { s in
            s.timers.forEach { $0.invalidate() }
            return (s.answered, s.inFlight.count)
        }
        say("stopped: \(answered) answered, \(unanswered) unanswered")
        return 0
    }

    private func accept() {
        guard let (id, worker) = state.withLock({ s -> (UInt64, Worker)? in
            guard !s.stopping else { return nil }
            defer { s.nextID += 1 }
            s.inFlight.insert(s.nextID)
            return (s.nextID, workers[Int(s.nextID % UInt64(workers.count))])
        }) else { return }
        do {   // never block the main loop: a worker whose queue is full refuses the request
            try worker.inbox.send(msgid: Wire.request, components: Wire.encode(id, 1_000),
                                  from: replies, before: .now)
        } catch {
            state.withLock { s in s.inFlight.remove(id); s.refused += 1 }
            log("request \(id) refused by \(worker.thread.name): \(error)")
        }
    }

    private func collect(_ message: MessagePort.Message) {
        guard let id = Wire.decode(message, msgid: Wire.reply)?[0] else {
            return log("malformed reply \(message.msgid) dropped")
        }
        let drained = state.withLock { s in
            if s.inFlight.remove(id) != nil { s.answered += 1 }
            return s.stopping && s.inFlight.isEmpty
        }
        if drained { loop.stop() }
    }

    private func statusLine() -> String {
        state.withLock { s in
            "\(s.stopping ? "Stopping" : "Serving"): \(s.answered) answered, \(s.inFlight.count) in flight, \(s.refused) refused"
        }
    }

    /// SIGTERM: stop accepting, STOPPING=1, wait for the requests in flight (reporting those
    /// still unanswered after the drain timeout), then stop the main loop.
    private func beginShutdown() {
        guard let (pending, drainTimeout) = state.withLock({ s -> (Int, Duration)? in
            guard !s.stopping else { return nil }
            s.stopping = true
            return (s.inFlight.count, s.configuration.drainTimeout)
        }) else { return }
        notifier.stopping(status: "Stopping: waiting for \(pending) request(s)")
        say("stopping")
        guard pending > 0 else { return loop.stop() }
        loop.add(RunLoopTimer(fireAt: .now + drainTimeout) { [self] _ in
            for id in state.withLock({ $0.inFlight.sorted() }) { log("request \(id) unanswered at shutdown") }
            loop.stop()
        }, forMode: .default)
    }

    /// SIGHUP: RELOADING=1, re-read the configuration (keeping the old one if that fails),
    /// reschedule the timers, READY=1.
    private func reload() {
        guard !state.withLock({ $0.stopping }) else { return }
        notifier.reloading(status: "Reloading configuration")
        do {
            let configuration = try Configuration.load(path: configurationPath)
            state.withLock { $0.configuration = configuration }
            log("reloaded: \(configuration)")
        } catch {
            log("reload failed, keeping the previous configuration: \(error)")
        }
        scheduleTimers()
        notifier.ready(status: statusLine())
        say("reloaded")
    }

    /// (Re)creates the request and status timers from the current configuration.
    private func scheduleTimers() {
        let configuration = state.withLock { $0.configuration }
        let timers = [
            RunLoopTimer(interval: configuration.requestInterval, repeats: true) { [self] _ in accept() },
            RunLoopTimer(interval: configuration.statusInterval, repeats: true) { [self] _ in
                notifier.status(statusLine())
            },
        ]
        state.withLock { s in defer { s.timers = timers }; return s.timers }.forEach { $0.invalidate() }
        timers.forEach { loop.add($0, forMode: .default) }
    }
}

import ExampleWire
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A resident thread whose loop serves the requests the main thread hands it: it answers the
/// client directly, records the outcome in the ledger, then tells the main thread the request
/// is settled.
///
/// A reply never waits for its client. It is queued on the client's socket at once (a send
/// with a deadline of now) or dropped: a client that does not read its replies fills its
/// socket, and a worker that waited on it — even a second per reply — would serve no one else
/// for as long as that client kept sending (and withhold the watchdog's progress). A dropped
/// reply is counted and logged (the first few in full, then a count at most once a second).
/// Dropping rather than cutting the client off: the worker holds no connection of its own to
/// cut (the reply port is the client's, per request), a request/reply client times out on its
/// own, and a client that catches up is served again with no state kept for it here.
final class Worker: Sendable {
    let thread: ResidentThread
    let inbox: MessagePort
    private let drops: DropLog

    init(name: String, done: MessagePort, ledger: Ledger) throws(PortError) {
        inbox = try MessagePort(queueLimit: 256)
        inbox.label = "\(name) inbox"
        thread = ResidentThread(name: name)
        let drops = DropLog(worker: name)
        self.drops = drops
        inbox.setHandler { message in   // runs on the worker's thread
            guard let request = Wire.decode(message, msgid: Wire.request, count: 3), let client = message.port(at: 1) else {
                return log("\(name): malformed message \(message.msgid) dropped")
            }
            let (id, key, rounds) = (request[0], request[1], request[2])
            // Past the drain's deadline a request is refused, and one under way stops at its
            // next check: the drain is bounded by drain_timeout_ms, not by the work queued.
            let result = ledger.isAbandoned ? nil : Wire.work(key: key, rounds: rounds) { !ledger.isAbandoned }
            let reply: (msgid: UInt32, words: MessagePort.Message.Component) = result.map { (Wire.reply, Wire.encode(key, $0)) }
                ?? (Wire.refused, Wire.encode(key, Wire.Refusal.stopping.rawValue))
            var outcome: Ledger.Outcome = result == nil ? .refused(.stopping) : .answered
            do {
                try client.send(msgid: reply.msgid, components: [reply.words], before: .now)
            } catch {
                outcome = .dropped
                drops.record(id, error)
            }
            ledger.settle(id, outcome)
            // Never full (see `Daemon.done`); a wake-up only, the outcome is in the ledger.
            do {
                try done.send(msgid: Wire.done, components: [Wire.encode(id)], before: .now)
            } catch {
                log("\(name): could not report request \(id) settled: \(error)")
            }
        }
        thread.runLoop.add(inbox, forMode: .default)
    }

    /// Stops the thread (waits for it to exit), then closes the inbox; logs the drops not yet
    /// reported.
    func stop() {
        thread.stop()
        inbox.invalidate()
        drops.flush()
    }
}

/// The worker's log of dropped replies, rate-limited without a timer: the first
/// `reportedInFull` drops get a line each, later ones a line with the count at most once per
/// `interval` (when a drop comes and the interval has passed), the rest at `flush()`.
/// Worker thread only, but a Mutex keeps the class honestly Sendable.
final class DropLog: Sendable {
    static let reportedInFull = 5
    static let interval: Duration = .seconds(1)

    private struct State {
        var total = 0
        var unreported = 0
        var lastReport: ContinuousClock.Instant?
    }

    private let worker: String
    private let state = Mutex(State())

    init(worker: String) { self.worker = worker }

    func record(_ id: UInt64, _ error: any Error) {
        let line = state.withLock { s -> String? in
            s.total += 1
            if s.total <= Self.reportedInFull {
                return "\(worker): reply to request \(id) dropped (\(error))"
                    + (s.total == Self.reportedInFull ? "; further drops are counted, one line a second at most" : "")
            }
            s.unreported += 1
            let now = ContinuousClock.now
            guard s.lastReport.map({ $0.duration(to: now) >= Self.interval }) ?? true else { return nil }
            defer { (s.unreported, s.lastReport) = (0, now) }
            return "\(worker): \(s.unreported) more replies dropped (\(s.total) in all; latest: request \(id), \(error))"
        }
        if let line { log(line) }
    }

    func flush() {
        let line = state.withLock { s -> String? in
            guard s.unreported > 0 else { return nil }
            defer { s.unreported = 0 }
            return "\(worker): \(s.unreported) more replies dropped (\(s.total) in all)"
        }
        if let line { log(line) }
    }
}

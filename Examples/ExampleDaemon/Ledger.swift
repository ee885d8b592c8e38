import ExampleWire
import Synchronization

/// What became of every request the daemon accepted, shared by the main thread (which admits
/// requests) and the workers (which settle them). A request is counted when its reply or
/// refusal was queued on the client's socket (so the client gets it, even if the daemon exits
/// next), or dropped; what is still in flight when the workers have stopped was never answered.
/// The summary SIGTERM prints is therefore what the clients received, not what the main loop
/// had heard of when it stopped.
final class Ledger: Sendable {
    struct Counts: Sendable {
        var inFlight: Set<UInt64> = []
        var answered = 0
        var refused: [Wire.Refusal: Int] = [:]
        /// Replies that could not be queued at once on the client's socket (it does not read
        /// its replies, or is gone): dropped, never waited for.
        var dropped = 0

        var refusedInAll: Int { refused.values.reduce(0, +) }
    }

    enum Outcome: Sendable {
        case answered, refused(Wire.Refusal), dropped
    }

    private let counts = Mutex(Counts())
    /// Set when the drain's deadline passes: a worker then refuses what it holds instead of
    /// working on it, and a long request stops at its next check (`Wire.work(key:rounds:while:)`).
    private let abandoned = Atomic(false)

    /// Records request `id` as in flight.
    func admit(_ id: UInt64) {
        counts.withLock { _ = $0.inFlight.insert(id) }
    }

    /// Records the outcome of request `id` (admitted or not: a refusal at the door has none).
    /// Returns the requests still in flight.
    @discardableResult
    func settle(_ id: UInt64?, _ outcome: Outcome) -> Int {
        counts.withLock { c in
            if let id { c.inFlight.remove(id) }
            switch outcome {
            case .answered: c.answered += 1
            case .refused(let reason): c.refused[reason, default: 0] += 1
            case .dropped: c.dropped += 1
            }
            return c.inFlight.count
        }
    }

    /// Forgets request `id`: it never reached a worker and was refused at the door instead.
    func withdraw(_ id: UInt64) {
        counts.withLock { _ = $0.inFlight.remove(id) }
    }

    var snapshot: Counts { counts.withLock { $0 } }

    var inFlightCount: Int { counts.withLock { $0.inFlight.count } }

    /// The drain's deadline passed: stop working on requests.
    func abandon() { abandoned.store(true, ordering: .releasing) }

    var isAbandoned: Bool { abandoned.load(ordering: .acquiring) }
}

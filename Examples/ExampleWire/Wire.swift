import FoundationEssentials
import RunLoopKit

/// The example service's messages, shared by example-daemon and example-client. Every DATA
/// component is a sequence of little-endian 64-bit words.
///
/// - client → daemon: `request` [key, rounds], with the client's reply port as `from:`
/// - daemon → client: `reply` [key, result], or `refused` [key, reason] (a `Refusal`)
/// - daemon → worker: `request` [id, key, rounds], component 1: the client's reply port
/// - worker → daemon: `done` [id]: the request is settled (its outcome is in the daemon's ledger)
public enum Wire {
    public static let request: UInt32 = 1
    public static let reply: UInt32 = 2
    public static let done: UInt32 = 3
    public static let refused: UInt32 = 4

    /// The service's name when none is configured.
    public static let defaultName = "example-daemon"

    /// Why a request was refused: the second word of a `refused` message. A client must not
    /// read every refusal as "the daemon is stopping": a busy daemon and a request asking for
    /// too much work are refused too, and only the first is worth retrying elsewhere.
    public enum Refusal: UInt64, Sendable, CustomStringConvertible {
        /// SIGTERM: the daemon takes no more work (or its drain timeout passed first).
        case stopping = 1
        /// The worker the request was for has a full queue: retry later.
        case busy = 2
        /// `rounds` is above the daemon's `max_rounds`: never retry as is.
        case tooManyRounds = 3

        public var description: String {
            switch self {
            case .stopping: "the daemon is stopping"
            case .busy: "the daemon is busy: its workers' queues are full"
            case .tooManyRounds: "rounds above the daemon's max_rounds"
            }
        }
    }

    public static func encode(_ words: UInt64...) -> MessagePort.Message.Component {
        .data(words.withUnsafeBytes { Data($0) })
    }

    /// The words of the first component when `message` is `msgid` and has `count` of them.
    public static func decode(_ message: MessagePort.Message, msgid: UInt32, count: Int) -> [UInt64]? {
        guard message.msgid == msgid, let bytes = message.data(at: 0), bytes.count == count * 8 else { return nil }
        return bytes.withUnsafeBytes { raw in (0..<count).map { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self)) } }
    }

    /// The "work" a request asks for: `rounds` rounds of FNV-1a over `key`. The client checks
    /// every reply against it.
    public static func work(key: UInt64, rounds: UInt64) -> UInt64 {
        work(key: key, rounds: rounds, while: { true })!
    }

    /// `work(key:rounds:)` that asks `keepGoing` every `roundsPerCheck` rounds and gives up
    /// (nil) when it says no: a daemon's drain can end a long request at its deadline instead
    /// of waiting for it.
    public static func work(key: UInt64, rounds: UInt64, while keepGoing: () -> Bool) -> UInt64? {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        var round: UInt64 = 0
        while round < rounds {
            guard keepGoing() else { return nil }
            let end = rounds - round > roundsPerCheck ? round + roundsPerCheck : rounds
            while round < end {
                hash = (hash ^ (key &+ round)) &* 0x100_0000_01b3
                round += 1
            }
        }
        return hash
    }

    /// A few milliseconds of work in a debug build, well under one in release.
    static let roundsPerCheck: UInt64 = 1 << 18
}

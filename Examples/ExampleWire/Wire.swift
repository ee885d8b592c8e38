import FoundationEssentials
import RunLoopKit

/// The example service's messages, shared by example-daemon and example-client. Every DATA
/// component is a sequence of little-endian 64-bit words.
///
/// - client → daemon: `request` [key, rounds], with the client's reply port as `from:`
/// - daemon → client: `reply` [key, result], or `refused` [key] while the daemon stops
/// - daemon → worker: `request` [id, key, rounds], component 1: the client's reply port
/// - worker → daemon: `done` [id, 1 if the reply went out else 0]
public enum Wire {
    public static let request: UInt32 = 1
    public static let reply: UInt32 = 2
    public static let done: UInt32 = 3
    public static let refused: UInt32 = 4

    /// The service's name when none is configured.
    public static let defaultName = "example-daemon"

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
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for round in 0..<rounds { hash = (hash ^ (key &+ round)) &* 0x100_0000_01b3 }
        return hash
    }
}

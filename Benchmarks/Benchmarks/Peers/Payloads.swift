import CBenchmarkPeers
import Foundation

/// The payloads of the Swift peers, as `Data` — what a daemon hands between threads
/// and what MessagePort carries — so every Swift row pays for the same payload.
enum Payloads {
    /// The 8-byte ping-pong payload: a sequence number, stored inline in `Data`.
    static func sequence(_ seq: UInt64) -> Data {
        withUnsafeBytes(of: seq.littleEndian) { Data($0) }
    }

    /// Reads a ping-pong payload back; nil unless it is exactly 8 bytes.
    static func sequence(of data: Data) -> UInt64? {
        guard data.count == 8 else { return nil }
        return UInt64(littleEndian: data.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) })
    }

    /// The 64-byte stream payload (layout: `bench_payload_fill`).
    static func stream(_ seq: UInt64, last: Bool) -> Data {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: Int(BENCH_PAYLOAD_WORDS)) { words in
            bench_payload_fill(words.baseAddress, seq, last ? 1 : 0)
            return Data(bytes: words.baseAddress!, count: Int(BENCH_PAYLOAD_BYTES))
        }
    }

    /// Checks a stream payload against `seq`; returns whether it was the last one, or
    /// nil when it is wrong. (Through `withUnsafeBytes`: `Data.copyBytes(to:)` goes
    /// through the generic DataProtocol path, which cost more than the queues measured.)
    static func checkStream(_ data: Data, expected seq: UInt64) -> Bool? {
        guard data.count == Int(BENCH_PAYLOAD_BYTES) else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: Int(BENCH_PAYLOAD_WORDS)) { words in
            data.withUnsafeBytes { UnsafeMutableRawBufferPointer(words).copyMemory(from: $0) }
            var last: Int32 = 0
            guard bench_payload_check(words.baseAddress, seq, &last) != 0 else { return nil }
            return last != 0
        }
    }

    /// Checks a fan-in payload, whose word 0 is `sender << 48 | n`, against that sender's next
    /// `n` in `expected` (indexed by sender, `senders` of them): returns the sender and whether
    /// it was that sender's last payload, or nil when it is wrong. One read of the bytes, as
    /// `checkStream` makes, so that a fan-in message costs the receiver what a stream message does.
    static func checkFanIn(_ data: Data, expected: UnsafePointer<UInt64>, senders: Int) -> (sender: Int, last: Bool)? {
        guard data.count == Int(BENCH_PAYLOAD_BYTES) else { return nil }
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: Int(BENCH_PAYLOAD_WORDS)) { words in
            data.withUnsafeBytes { UnsafeMutableRawBufferPointer(words).copyMemory(from: $0) }
            let sender = Int(words[0] >> 48)
            guard sender < senders else { return nil }
            var last: Int32 = 0
            guard bench_payload_check(words.baseAddress, UInt64(sender) << 48 | expected[sender], &last) != 0 else { return nil }
            return (sender, last != 0)
        }
    }

    /// A scale row's payload of `bytes` bytes (byte i is a pattern of i), built once per point
    /// and sent again and again: in process a `Data` is shared, not copied.
    static func block(_ bytes: Int) -> Data {
        Data((0..<bytes).map { blockByte($0) })
    }

    /// Checks a block's length and its first, middle and last bytes (a full compare of 1 MiB
    /// per message would measure the compare).
    static func checkBlock(_ data: Data, bytes: Int) -> Bool {
        guard data.count == bytes else { return false }
        return data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Bool in
            [0, bytes / 2, bytes - 1].allSatisfy { index in index < 0 || raw[index] == blockByte(index) }
        }
    }

    private static func blockByte(_ index: Int) -> UInt8 { UInt8(truncatingIfNeeded: index &* 131 &+ 7) }
}

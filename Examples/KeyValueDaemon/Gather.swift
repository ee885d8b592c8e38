/// A command whose keys live on several shards (MGET, MSET, DEL, EXISTS), or that every shard
/// runs (DBSIZE, FLUSHALL), while its parts come back: each shard answers for its own keys,
/// and once all have, the parts are merged into the one reply Redis would give.
///
/// Only a command that really spans shards gathers; with one shard, or keys that all hash to
/// one, the command goes whole to its shard. Network thread only.
final class Gather {
    let command: Command
    /// For MGET: the shard of each key, in the command's order, to interleave the values.
    private let keyShards: [Int]
    private var parts: [[UInt8]]
    private var remaining: Int

    init(command: Command, shards: Int, expecting: Int, keyShards: [Int] = []) {
        self.command = command
        self.keyShards = keyShards
        parts = Array(repeating: [], count: shards)
        remaining = expecting
    }

    /// Records `shard`'s part; true once every part is in.
    func add(_ part: UnsafeRawBufferPointer, from shard: Int) -> Bool {
        parts[shard] = Array(part)
        remaining -= 1
        return remaining == 0
    }

    /// The merged reply, once every part is in.
    func reply() -> [UInt8] {
        var merged = ByteBuffer()
        switch command {
        case .mget:
            merged.appendArrayHeader(keyShards.count)
            var cursors = Array(repeating: 0, count: parts.count)
            for shard in keyShards {
                parts[shard].withUnsafeBytes { part in
                    let length = Self.bulkLength(in: part, at: cursors[shard])
                    merged.append(UnsafeRawBufferPointer(rebasing: part[cursors[shard]..<(cursors[shard] + length)]))
                    cursors[shard] += length
                }
            }
        case .del, .exists, .dbsize:
            var sum: Int64 = 0
            for part in parts where !part.isEmpty {
                // ":<n>\r\n"
                sum += part.withUnsafeBytes { RedisInteger.parse(UnsafeRawBufferPointer(rebasing: $0[1..<($0.count - 2)])) } ?? 0
            }
            merged.appendInteger(sum)
        default:
            // MSET, FLUSHALL: every part is +OK.
            merged.appendSimple("OK")
        }
        return Array(merged.bytes)
    }

    /// The length of the bulk string reply (`$-1\r\n`, or `$<n>\r\n<n bytes>\r\n`) at `offset`.
    private static func bulkLength(in part: UnsafeRawBufferPointer, at offset: Int) -> Int {
        var lineEnd = offset
        while part[lineEnd] != UInt8(ascii: "\r") { lineEnd += 1 }
        let header = UnsafeRawBufferPointer(rebasing: part[(offset + 1)..<lineEnd])
        if header.count == 2 && header[0] == UInt8(ascii: "-") { return lineEnd + 2 - offset }
        return lineEnd + 2 + Int(RedisInteger.parse(header)!) + 2 - offset
    }
}

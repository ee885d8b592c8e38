import Foundation
import PackageTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One command of the script: its arguments, and for TTL and PTTL the largest value the reply
/// may hold (the time left depends on when the command runs, so both servers' replies are
/// checked to lie in [0, bound] and then compared as equal).
struct ScriptCommand {
    var arguments: [[UInt8]]
    var ttlBound: Int64?

    init(_ arguments: [String], ttlBound: Int64? = nil) {
        self.arguments = arguments.map { Array($0.utf8) }
        self.ttlBound = ttlBound
    }

    init(bytes arguments: [[UInt8]]) {
        self.arguments = arguments
    }
}

/// A step of the differential script.
enum ScriptStep {
    /// Commands sent in one write on the script's connection; one reply each.
    case pipeline([ScriptCommand])
    /// Bytes sent as they are on the script's connection, then this many replies read.
    case raw(String, replies: Int)
    /// Bytes sent on a new connection, then everything read until the server closes it.
    case rawUntilClosed(String)
    /// Waits until GET `key` is nil on both servers (its deadline has passed).
    case waitUntilExpired(String)
}

private func c(_ arguments: String..., ttlBound: Int64? = nil) -> ScriptCommand {
    ScriptCommand(arguments, ttlBound: ttlBound)
}

private func one(_ arguments: String..., ttlBound: Int64? = nil) -> ScriptStep {
    .pipeline([ScriptCommand(arguments, ttlBound: ttlBound)])
}

/// The bulk-string limit both servers run with (kv-daemon's --max-bulk-bytes, redis-server's
/// proto-max-bulk-len, whose smallest value is 1 MB), so that the over-limit case is compared too.
let differentialBulkLimit = 1 << 20

/// Every command kv-daemon serves, their error cases, pipelined batches, inline commands,
/// protocol errors and expiry. Each step runs against redis-server and kv-daemon.
let differentialScript: [ScriptStep] = {
    var steps: [ScriptStep] = []
    // PING, ECHO
    steps += [one("PING"), one("ping"), one("PING", "hello"), one("PING", "a", "b"), one("ECHO", "x y"), one("ECHO"),
              one("ECHO", "a", "b"), one("echo", "")]
    // SET and GET, values of any bytes
    steps += [one("SET", "k", "v"), one("GET", "k"), one("GET", "missing"), one("SET", "k", ""), one("GET", "k"),
              .pipeline([ScriptCommand(bytes: [Array("SET".utf8), Array("bin".utf8), [0, 13, 10, 255, 36, 42, 0]]),
                         ScriptCommand(bytes: [Array("GET".utf8), Array("bin".utf8)])]),
              one("SET"), one("SET", "k"), one("GET"), one("GET", "a", "b"), one("set", "Mixed", "case"), one("get", "Mixed")]
    // SET's options
    steps += [one("SET", "k", "v1", "NX"), one("SET", "fresh", "v", "NX"), one("SET", "nothere", "v", "XX"),
              one("SET", "k", "v2", "XX"), one("GET", "k"), one("SET", "k", "v", "NX", "XX"), one("SET", "k", "v", "XX", "NX"),
              one("SET", "k", "v3", "GET"), one("SET", "newget", "v", "GET"), one("SET", "k", "v4", "NX", "GET"),
              one("SET", "k", "v5", "xx", "get"), one("SET", "k", "v", "GET", "GET"), one("SET", "k", "v", "NX", "NX"),
              one("SET", "ex", "v", "EX", "100"), one("TTL", "ex", ttlBound: 100), one("PTTL", "ex", ttlBound: 100_000),
              one("SET", "px", "v", "PX", "100000"), one("PTTL", "px", ttlBound: 100_000), one("TTL", "px", ttlBound: 100),
              one("SET", "k", "v", "EX", "0"), one("SET", "k", "v", "EX", "-5"), one("SET", "k", "v", "PX", "0"),
              one("SET", "k", "v", "EX", "abc"), one("SET", "k", "v", "EX", "1.5"), one("SET", "k", "v", "EX", "+1"),
              one("SET", "k", "v", "EX", "010"), one("SET", "k", "v", "EX"), one("SET", "k", "v", "PX"),
              one("SET", "k", "v", "EX", "10", "PX", "10"), one("SET", "k", "v", "PX", "10", "EX", "10"),
              one("SET", "ex", "v", "EX", "100", "EX", "200"), one("TTL", "ex", ttlBound: 200),
              one("SET", "ex", "w", "KEEPTTL"), one("TTL", "ex", ttlBound: 200), one("GET", "ex"),
              one("SET", "ex", "w", "KEEPTTL", "EX", "10"), one("SET", "ex", "w", "EX", "10", "KEEPTTL"),
              one("SET", "ex", "x"), one("TTL", "ex"),
              one("SET", "k", "v", "EX", "9223372036854775807"), one("SET", "k", "v", "EX", "9223372036854775"),
              one("SET", "k", "v", "PX", "9223372036854775807"), one("SET", "k", "v", "EX", "99999999999999999999"),
              one("SET", "at", "v", "EXAT", "32503680000"), one("EXISTS", "at"),
              one("SET", "at", "v", "PXAT", "32503680000000"), one("EXISTS", "at"),
              one("SET", "past", "v", "EXAT", "1"), one("GET", "past"), one("EXISTS", "past"),
              one("SET", "k", "v", "EXAT", "0"), one("SET", "k", "v", "PXAT", "-1"), one("SET", "k", "v", "EXAT", "1", "PX", "1"),
              one("SET", "k", "v", "foo"), one("SET", "k", "v", "ex", "5", "nx"), one("SET", "k", "v", "keepttl", "keepttl")]
    // INCR, DECR, INCRBY
    steps += [one("INCR", "n"), one("INCR", "n"), one("DECR", "n"), one("DECR", "fresh-n"), one("INCRBY", "n", "10"),
              one("INCRBY", "n", "-3"), one("INCRBY", "n", "abc"), one("INCRBY", "n", ""), one("INCRBY", "n", "0"),
              one("INCR", "k"), one("SET", "big", "9223372036854775807"), one("INCR", "big"), one("INCRBY", "big", "0"),
              one("SET", "small", "-9223372036854775808"), one("DECR", "small"), one("INCRBY", "small", "-1"),
              one("INCRBY", "small", "9223372036854775807"), one("INCRBY", "n", "9223372036854775808"),
              one("SET", "sp", " 1"), one("INCR", "sp"), one("SET", "lz", "01"), one("INCR", "lz"),
              one("SET", "mz", "-0"), one("INCR", "mz"), one("SET", "plus", "+5"), one("INCR", "plus"),
              one("SET", "t", "5", "EX", "100"), one("INCR", "t"), one("TTL", "t", ttlBound: 100), one("GET", "t"),
              one("INCR"), one("INCR", "a", "b"), one("DECR"), one("INCRBY", "n"), one("INCRBY", "n", "1", "2")]
    // DEL, EXISTS, MGET, MSET: several keys, spread over the shards
    steps += [one("MSET", "a", "1", "b", "2", "c", "3", "d", "4", "e", "5"), one("MGET", "a", "b", "missing", "c", "d", "e", "a"),
              one("EXISTS", "a", "a", "b", "missing", "e"), one("DEL", "a", "missing", "b", "b"), one("EXISTS", "a", "b", "c"),
              one("MGET", "a", "b", "c"), one("MSET", "a"), one("MSET", "a", "1", "b"), one("MSET"), one("MGET"), one("DEL"),
              one("EXISTS"), one("MSET", "a", "x", "a", "y"), one("GET", "a"), one("MSET", "ex", "v"), one("TTL", "ex"),
              one("DEL", "c", "d", "e", "fresh", "newget", "Mixed")]
    // EXPIRE, PEXPIRE, TTL, PTTL
    steps += [one("EXPIRE", "missing", "10"), one("SET", "x", "v"), one("TTL", "x"), one("PTTL", "x"), one("TTL", "missing"),
              one("PTTL", "missing"), one("EXPIRE", "x", "100"), one("TTL", "x", ttlBound: 100),
              one("EXPIRE", "x", "100", "NX"), one("EXPIRE", "x", "200", "XX"), one("TTL", "x", ttlBound: 200),
              one("EXPIRE", "x", "50", "GT"), one("EXPIRE", "x", "500", "GT"), one("EXPIRE", "x", "1000", "LT"),
              one("EXPIRE", "x", "10", "lt"), one("TTL", "x", ttlBound: 10), one("SET", "y", "v"),
              one("EXPIRE", "y", "10", "XX"), one("EXPIRE", "y", "10", "GT"), one("EXPIRE", "y", "10", "LT"),
              one("TTL", "y", ttlBound: 10), one("EXPIRE", "x", "abc"), one("EXPIRE", "x", "10", "bogus"),
              one("EXPIRE", "x", "10", "NX", "XX"), one("EXPIRE", "x", "10", "GT", "LT"), one("EXPIRE", "x", "10", "NX", "GT"),
              one("EXPIRE", "x", "abc", "bogus"), one("EXPIRE", "x", "9223372036854775807"),
              one("EXPIRE", "x", "-9223372036854775807"), one("PEXPIRE", "x", "9223372036854775807"),
              one("PEXPIRE", "x", "100000"), one("PTTL", "x", ttlBound: 100_000), one("PEXPIRE", "x", "5000", "LT"),
              one("TTL", "x", ttlBound: 5), one("EXPIRE", "x", "-1"), one("GET", "x"), one("EXISTS", "x"),
              one("SET", "z", "v"), one("PEXPIRE", "z", "0"), one("EXISTS", "z"), one("EXPIRE"), one("EXPIRE", "x"),
              one("TTL"), one("TTL", "a", "b"), one("PTTL"), one("PEXPIRE", "x")]
    // Expiry: deadlines that pass while the script runs
    steps += [one("SET", "soon", "v", "PX", "50"), one("SET", "later", "v", "PX", "120"), one("SET", "kept", "v"),
              one("PEXPIRE", "kept", "80"), one("SET", "eternal", "v", "EX", "1000"),
              .waitUntilExpired("soon"), .waitUntilExpired("later"), .waitUntilExpired("kept"),
              one("EXISTS", "soon", "later", "kept", "eternal"), one("TTL", "soon"), one("PTTL", "later"),
              one("MGET", "soon", "later", "kept", "eternal"), one("INCR", "soon"), one("TTL", "soon")]
    // DBSIZE, FLUSHALL
    steps += [one("DBSIZE"), one("DBSIZE", "x"), one("FLUSHALL", "foo"), one("FLUSHALL", "async", "x"), one("FLUSHALL"),
              one("DBSIZE"), one("SET", "a", "1"), one("FLUSHALL", "ASYNC"), one("DBSIZE"), one("SET", "a", "1"),
              one("flushall", "sync"), one("GET", "a")]
    // What Redis checks before any command runs
    steps += [one("FOO"), one("FOO", "bar", "baz"), one("foo", "a\r\nb"),
              one("NOPE", String(repeating: "x", count: 200), "next"), one("NOPE", String(repeating: "y", count: 100), "z" + String(repeating: "w", count: 50), "more"),
              one(String(repeating: "c", count: 300)), one("CONFIG"), one("CONFIG", "GET"), one("CONFIG", "FOO"),
              one("config", "nope", "x"), one("CONFIG", "GET", "save"), one("CONFIG", "GET", "appendonly"),
              one("CONFIG", "GET", "APPENDONLY"), one("CONFIG", "GET", "no-such-setting"),
              one("CLIENT"), one("CLIENT", "FOO"), one("CLIENT", "SETNAME"), one("CLIENT", "SETNAME", "a", "b"),
              one("CLIENT", "SETNAME", "bad name"), one("CLIENT", "GETNAME"), one("CLIENT", "SETNAME", "script"),
              one("CLIENT", "GETNAME"), one("CLIENT", "SETNAME", ""), one("CLIENT", "GETNAME"), one("CLIENT", "GETNAME", "x"),
              one("HELLO", "x"), one("HELLO", "1"), one("HELLO", "4"), one("HELLO", "2", "foo"), one("HELLO", "2", "SETNAME"),
              one("HELLO", "2", "AUTH", "nobody", "pw"), one("HELLO", "2", "SETNAME", "bad name"),
              one("COMMAND", "FOO"), one("COMMAND", "COUNT", "x")]
    // A pipelined batch: many commands in one write, errors among them
    var batch: [ScriptCommand] = []
    for index in 0..<200 {
        switch index % 8 {
        case 0: batch.append(c("SET", "p\(index % 37)", "\(index)"))
        case 1: batch.append(c("GET", "p\((index * 7) % 37)"))
        case 2: batch.append(c("INCR", "counter"))
        case 3: batch.append(c("MGET", "p1", "p2", "p\(index % 37)", "nope"))
        case 4: batch.append(c("INCR", "p\(index % 37)"))
        case 5: batch.append(c("PING"))
        case 6: batch.append(c("DEL", "p\((index * 3) % 37)", "p\((index * 5) % 37)"))
        default: batch.append(c("BOGUS", "\(index)"))
        }
    }
    steps += [.pipeline(batch), .pipeline(batch.reversed()), one("DBSIZE")]
    // Inline commands
    steps += [.raw("PING\r\n", replies: 1), .raw("SET ik iv\r\nGET ik\r\n", replies: 2), .raw("\r\n\r\nPING x\n", replies: 1),
              .raw("SET \"q k\" \"a\\x41\\n\\t\"\r\nGET \"q k\"\r\n", replies: 2), .raw("SET 'sq' 'it\\'s'\r\nGET sq\r\n", replies: 2),
              .raw("  echo   spaced   \r\n", replies: 1), .raw("ECHO \"\"\r\n", replies: 1)]
    // Empty and negative multibulk counts are skipped without a reply
    steps += [.raw("*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n", replies: 1),
              .raw("*2\r\n$4\r\nECHO\r\n$3\r\nabcXY", replies: 1)]
    // Protocol errors: the error, then the connection closes (replies before it are kept)
    let overLimit = differentialBulkLimit + 1
    steps += [.rawUntilClosed("*x\r\n"), .rawUntilClosed("*1\r\nfoo\r\n"), .rawUntilClosed("*1\r\n$-1\r\n"),
              .rawUntilClosed("*1\r\n$x\r\n"), .rawUntilClosed("*2\r\n$3\r\nGET\r\n:1\r\n"),
              .rawUntilClosed("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$\(overLimit)\r\n"),
              .rawUntilClosed("PING\r\n*1\r\n$4\r\nPING\r\n*99999999999\r\n"),
              .rawUntilClosed("SET \"abc\r\n"), .rawUntilClosed("SET \"a\"b\r\n"), .rawUntilClosed("PING\r\nhost: x\r\nPING\r\n"),
              .rawUntilClosed("*1\r\n$4\r\nPOST\r\n"), .rawUntilClosed("PING\r\nQUIT\r\nPING\r\n"),
              .rawUntilClosed("*2\r\n$4\r\nQUIT\r\n$3\r\nnow\r\n")]
    return steps
}()

@Suite("kv-daemon against redis-server")
struct DifferentialTests {
    @Test("the same script over raw sockets gets byte-identical replies from redis-server and kv-daemon (1 shard)")
    func oneShard() async throws {
        try await compare(shards: 1)
    }

    @Test("the same script gets byte-identical replies from kv-daemon with 3 shards (commands on several keys split and merged)")
    func threeShards() async throws {
        try await compare(shards: 3)
    }

    private func compare(shards: Int) async throws {
        let mismatches: [String] = try await onNewThread {
            Result { try Self.run(shards: shards) }
        }.get()
        #expect(mismatches.isEmpty, "\(mismatches.count) mismatch(es):\n\(mismatches.joined(separator: "\n"))")
    }

    private static func run(shards: Int) throws -> [String] {
        let redis = try RedisServer(arguments: ["--proto-max-bulk-len", "\(differentialBulkLimit)"])
        let daemon = try KVDaemon(shards: shards, arguments: ["--max-bulk-bytes", "\(differentialBulkLimit)"])
        let servers = [("redis-server", redis.port), ("kv-daemon", daemon.port)]
        let clients = try servers.map { try RawClient(port: $0.1) }
        var mismatches: [String] = []
        for (number, step) in differentialScript.enumerated() {
            let replies: [[[UInt8]]]
            let label: String
            switch step {
            case .pipeline(let commands):
                label = commands.count == 1
                    ? commands[0].arguments.map { RESP.show($0.prefix(40)) }.joined(separator: " ")
                    : "pipeline of \(commands.count)"
                let bytes = commands.flatMap { RawClient.encode($0.arguments) }
                replies = try clients.map { client in
                    try client.send(bytes)
                    return try client.replies(commands.count).enumerated().map { normalise($1, for: commands[$0]) }
                }
            case .raw(let text, let count):
                label = "raw \(RESP.show(text.utf8.prefix(60)))"
                replies = try clients.map { client in
                    try client.send(Array(text.utf8))
                    return try client.replies(count)
                }
            case .rawUntilClosed(let text):
                label = "raw, then closed: \(RESP.show(text.utf8.prefix(60)))"
                replies = try servers.map { server in
                    let client = try RawClient(port: server.1)
                    try client.send(Array(text.utf8))
                    return [try client.readToEnd()]
                }
            case .waitUntilExpired(let key):
                label = "wait for \(key) to expire"
                for client in clients {
                    let expired = eventually { (try? client.roundTrip(["GET", key])) == Array("$-1\r\n".utf8) }
                    if !expired { mismatches.append("step \(number) (\(label)): the key never expired") }
                }
                continue
            }
            if replies[0] != replies[1] {
                mismatches.append("""
                    step \(number) (\(label)):
                      redis-server: \(replies[0].map { RESP.show($0) })
                      kv-daemon:    \(replies[1].map { RESP.show($0) })
                    """)
            }
        }
        let (exit, _) = try daemon.stop()
        if exit != .exited(0) { mismatches.append("kv-daemon \(exit)") }
        return mismatches
    }

    /// A TTL or PTTL reply in [0, bound] becomes a fixed marker (both servers' replies are
    /// compared after this); any other reply, a negative one included, is compared as it is.
    private static func normalise(_ reply: [UInt8], for command: ScriptCommand) -> [UInt8] {
        guard let bound = command.ttlBound, reply.first == UInt8(ascii: ":"),
              let value = Int64(String(decoding: reply.dropFirst().dropLast(2), as: UTF8.self)) else { return reply }
        return value >= 0 && value <= bound ? Array(":<0…\(bound)>\r\n".utf8) : reply
    }
}

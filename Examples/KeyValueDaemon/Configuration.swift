/// The daemon's settings, from its arguments. The limits bound what one client can make the
/// daemon hold (Redis's own defaults are larger or unbounded: 512 MB bulk strings, 1 GB query
/// buffers, no output limit for ordinary clients).
struct Configuration: CustomStringConvertible {
    /// TCP port on 127.0.0.1 (0: any free port, reported on the "ready" line).
    var port: UInt16 = 6380
    /// Shard threads, each owning the keys whose hash falls to it.
    var shards = 1
    /// Connections served at once; more are answered `-ERR max number of clients reached`
    /// (Redis's `maxclients`).
    var maxClients = 10_000
    /// The largest bulk string a request may carry: a longer one is a protocol error and
    /// closes the connection (Redis's `proto-max-bulk-len`, 512 MB there).
    var maxBulkBytes = 8 << 20
    /// The largest request (a whole command): a client that sends more without completing
    /// it is disconnected (Redis's `client-query-buffer-limit`, 1 GB there).
    var maxRequestBytes = 32 << 20
    /// Unwritten replies past which the daemon stops reading a connection's requests until
    /// its client has read them down to half of this.
    var maxOutputBytes = 1 << 20
    /// Commands one connection may have read and not yet answered: past it, its requests
    /// wait in the socket.
    var maxPipeline = 64 * 1024
    /// How long SIGTERM waits for the replies of commands already read.
    var drainTimeout: Duration = .seconds(5)

    static let usage = """
        usage: kv-daemon [--port N] [--shards N] [--max-clients N] [--max-bulk-bytes N]
                         [--max-request-bytes N] [--max-output-bytes N] [--drain-timeout-ms N]
        """

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ arguments: [String]) throws(UsageError) -> Configuration {
        var configuration = Configuration()
        var rest = arguments[...]
        func number(_ flag: String, in range: ClosedRange<Int>) throws(UsageError) -> Int {
            guard let text = rest.popFirst(), let value = Int(text), range.contains(value) else {
                throw UsageError(description: "\(flag) needs a number in \(range.lowerBound)...\(range.upperBound)\n\(usage)")
            }
            return value
        }
        while let flag = rest.popFirst() {
            switch flag {
            case "--port": configuration.port = UInt16(try number(flag, in: 0...65535))
            case "--shards": configuration.shards = try number(flag, in: 1...64)
            case "--max-clients": configuration.maxClients = try number(flag, in: 1...1_000_000)
            case "--max-bulk-bytes": configuration.maxBulkBytes = try number(flag, in: 1...(512 << 20))
            case "--max-request-bytes": configuration.maxRequestBytes = try number(flag, in: 1024...(1 << 30))
            case "--max-output-bytes": configuration.maxOutputBytes = try number(flag, in: 1024...(1 << 30))
            case "--drain-timeout-ms": configuration.drainTimeout = .milliseconds(try number(flag, in: 0...3_600_000))
            case "--help", "-h": throw UsageError(description: usage)
            default: throw UsageError(description: "unknown argument \(flag)\n\(usage)")
            }
        }
        guard configuration.maxRequestBytes >= configuration.maxBulkBytes + 1024 else {
            throw UsageError(description: "--max-request-bytes must exceed --max-bulk-bytes (a request holds a bulk string)")
        }
        return configuration
    }

    /// What CONFIG GET reports, under Redis's names, for a daemon listening on `boundPort`.
    func settings(boundPort: UInt16) -> [(name: String, value: String)] {
        [("save", ""), ("appendonly", "no"), ("port", "\(boundPort)"), ("databases", "1"),
         ("maxclients", "\(maxClients)"), ("proto-max-bulk-len", "\(maxBulkBytes)"),
         ("client-query-buffer-limit", "\(maxRequestBytes)")]
    }

    var description: String {
        "port \(port), \(shards) shard(s), max \(maxClients) clients, bulk ≤ \(maxBulkBytes) B, "
            + "request ≤ \(maxRequestBytes) B, output ≤ \(maxOutputBytes) B"
    }
}

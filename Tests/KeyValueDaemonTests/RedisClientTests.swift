import Foundation
import PackageTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Runs `tool` with `arguments` (stdin from `input`), waits for it; returns its status and output.
func runTool(_ tool: String, _ arguments: [String], input: [UInt8] = []) throws -> (Int32, String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try RedisTools.path(of: tool))
    process.arguments = arguments
    // Not Foundation's Pipe(): see closeOnExecStream.
    let (stdin, childStdin) = try closeOnExecStream()
    let (stdout, childStdout) = try closeOnExecStream()
    process.standardInput = childStdin
    process.standardOutput = childStdout
    process.standardError = childStdout
    do {
        defer { try? childStdin.close(); try? childStdout.close() }
        try process.run()
    }
    let writer = Thread {
        stdin.write(Data(input))
        shutdown(stdin.fileDescriptor, Int32(SHUT_WR))
    }
    writer.start()
    let killer = DispatchWorkItem { process.terminate() }
    DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(Int(patience.components.seconds)), execute: killer)
    let output = stdout.readDataToEndOfFile()
    process.waitUntilExit()
    killer.cancel()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

@Suite("kv-daemon under redis-cli and redis-benchmark")
struct RedisClientTests {
    @Test("redis-cli: commands given as arguments print the same against kv-daemon as against redis-server")
    func commandsAsArguments() async throws {
        let (redis, kv): ([String], [String]) = try await onNewThread {
            Result {
                let redis = try RedisServer()
                let daemon = try KVDaemon(shards: 2)
                let commands = [["SET", "greeting", "hello world"], ["GET", "greeting"], ["INCR", "visits"], ["INCRBY", "visits", "41"],
                                ["MSET", "a", "1", "b", "2"], ["MGET", "a", "b", "nope"], ["EXPIRE", "a", "100"], ["TTL", "nope"],
                                ["EXISTS", "a", "b", "nope"], ["DEL", "a", "b"], ["DBSIZE"], ["PING"], ["NOSUCH", "x"],
                                ["GET"], ["INCR", "greeting"], ["CLIENT", "SETNAME", "cli"], ["CONFIG", "GET", "appendonly"],
                                ["--no-raw", "MGET", "visits", "nope"], ["--no-raw", "INCR", "visits"], ["--no-raw", "NOSUCH"]]
                func outputs(_ port: UInt16) throws -> [String] {
                    try commands.map { command in
                        let (status, text) = try runTool("redis-cli", ["-p", "\(port)"] + command)
                        return "\(status) \(text)"
                    }
                }
                let results = (try outputs(redis.port), try outputs(daemon.port))
                _ = try daemon.stop()
                return results
            }
        }.get()
        #expect(kv == redis)
        #expect(kv.first == "0 OK\n" && kv[1] == "0 hello world\n" && kv[5] == "0 1\n2\n\n", "\(kv)")
    }

    @Test("redis-cli reading commands from stdin (it asks COMMAND DOCS first), -r repeats and --pipe mass insertion")
    func stdinRepeatAndPipe() async throws {
        let count = underSanitizer ? 2_000 : 20_000
        let results: [(Int32, String)] = try await onNewThread {
            Result {
                let daemon = try KVDaemon(shards: 2)
                let port = "\(daemon.port)"
                var results: [(Int32, String)] = []
                results.append(try runTool("redis-cli", ["-p", port], input: Array("SET k v\nGET k\nINCR n\nPING\n".utf8)))
                results.append(try runTool("redis-cli", ["-p", port, "-r", "100", "INCR", "repeated"]))
                results.append(try runTool("redis-cli", ["-p", port, "GET", "repeated"]))
                var mass: [UInt8] = []
                for index in 0..<count { mass += RawClient.encode(["SET", "mass:\(index)", "value \(index)"]) }
                results.append(try runTool("redis-cli", ["-p", port, "--pipe"], input: mass))
                results.append(try runTool("redis-cli", ["-p", port, "DBSIZE"]))
                results.append(try runTool("redis-cli", ["-p", port, "GET", "mass:\(count - 1)"]))
                _ = try daemon.stop()
                return results
            }
        }.get()
        #expect(results[0].0 == 0 && results[0].1 == "OK\nv\n1\nPONG\n", "\(results[0])")
        #expect(results[1].0 == 0 && results[1].1.split(separator: "\n").map(String.init) == (1...100).map(String.init))
        #expect(results[2].1 == "100\n")
        #expect(results[3].0 == 0 && results[3].1.contains("errors: 0, replies: \(count)"), "\(results[3])")
        #expect(results[4].1 == "\(count + 3)\n")
        #expect(results[5].1 == "value \(count - 1)\n")
    }

    @Test("redis-benchmark runs its tests against kv-daemon and reports every one in CSV")
    func benchmarkRuns() async throws {
        let requests = underSanitizer ? "500" : "5000"
        let (status, csv): (Int32, String) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(shards: 2)
                let result = try runTool("redis-benchmark", ["-p", "\(daemon.port)", "-t", "ping,set,get,incr,mset", "-n", requests,
                                                             "-c", "8", "-P", "4", "--csv"])
                _ = try daemon.stop()
                return result
            }
        }.get()
        #expect(status == 0, "\(csv)")
        for test in ["PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET (10 keys)"] {
            #expect(csv.contains("\"\(test)\","), "\(test) missing from:\n\(csv)")
        }
        #expect(!csv.contains("WARNING") && !csv.contains("ERR"), "\(csv)")
    }
}

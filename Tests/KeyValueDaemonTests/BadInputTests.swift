import Foundation
import PackageTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// Hostile and broken clients: none crashes the daemon, grows its memory without bound or
/// leaves a descriptor behind, and the other clients are served meanwhile.
@Suite("kv-daemon under bad input")
struct BadInputTests {
    @Test("malformed RESP gets Redis's protocol error and its connection closed; the daemon serves on and keeps no descriptor")
    func malformedRequests() async throws {
        let outcome: (replies: [[UInt8]], ping: [UInt8], leftBehind: [String]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon()
                let baseline = daemon.process.openDescriptors
                var replies: [[UInt8]] = []
                for garbage in ["*x\r\n", "*2\r\n$3\r\nGET\r\n!oops\r\n", "*1\r\n$-7\r\n", "*1\r\n$99999999999999999999\r\n",
                                "SET \"unterminated\r\n", String(repeating: "z", count: 70_000),
                                "*" + String(repeating: "9", count: 70_000)] {
                    let client = try RawClient(port: daemon.port)
                    try client.send(Array(garbage.utf8))
                    replies.append(try client.readToEnd())
                }
                let ping = try RawClient(port: daemon.port).roundTrip(["PING"])
                let leftBehind = daemon.process.descriptorsLeftBehind(since: baseline)
                _ = try daemon.stop()
                return (replies, ping, leftBehind)
            }
        }.get()
        #expect(outcome.replies.map { String(decoding: $0, as: UTF8.self) } == [
            "-ERR Protocol error: invalid multibulk length\r\n",
            "-ERR Protocol error: expected '$', got '!'\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
            "-ERR Protocol error: too big inline request\r\n",
            "-ERR Protocol error: too big mbulk count string\r\n",
        ])
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
        #expect(outcome.leftBehind == [], "descriptors left behind")
    }

    @Test("a bulk string over --max-bulk-bytes is refused from its length line, before its bytes; a request over --max-request-bytes closes the connection")
    func oversizedRequests() async throws {
        let outcome: (bulk: [UInt8], request: Bool, ping: [UInt8]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(arguments: ["--max-bulk-bytes", "4096", "--max-request-bytes", "65536"])
                let bulk = try RawClient(port: daemon.port)
                try bulk.send(Array("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4097\r\n".utf8))
                let refused = try bulk.readToEnd()
                // Many arguments under the bulk limit, more than a request may hold in all.
                let request = try RawClient(port: daemon.port)
                var big = Array("*1000\r\n$4\r\nMSET\r\n".utf8)
                for _ in 0..<40 { big += Array("$4000\r\n".utf8) + Array(repeating: UInt8(ascii: "v"), count: 4000) + [13, 10] }
                try? request.send(big)
                let cut = request.closedByPeer(before: .now + patience)
                let ping = try RawClient(port: daemon.port).roundTrip(["PING"])
                _ = try daemon.stop()
                return (refused, cut, ping)
            }
        }.get()
        #expect(outcome.bulk == Array("-ERR Protocol error: invalid bulk length\r\n".utf8))
        #expect(outcome.request, "a request past --max-request-bytes kept its connection")
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
    }

    @Test("half a command, then silence: other clients are served, the half is kept and completed later, and a client that leaves half-way leaves no descriptor")
    func halfACommand() async throws {
        let outcome: (other: [UInt8], completed: [[UInt8]], leftBehind: [String]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon()
                let baseline = daemon.process.openDescriptors
                let slow = try RawClient(port: daemon.port)
                try slow.send(Array("*3\r\n$3\r\nSET\r\n$4\r\nslow\r\n$10\r\nabc".utf8))
                let other = try RawClient(port: daemon.port).roundTrip(["PING"])
                try slow.send(Array("defghij\r\n*2\r\n$3\r\nGET\r\n$4\r\nslow\r\n".utf8))
                let completed = try slow.replies(2)
                var leavers: [RawClient] = []
                for index in 0..<20 {
                    let leaver = try RawClient(port: daemon.port)
                    try leaver.send(Array("*2\r\n$3\r\nGET\r\n$\(index + 5)\r\nab".utf8))
                    leavers.append(leaver)
                }
                leavers.forEach { $0.close() }
                slow.close()
                let leftBehind = daemon.process.descriptorsLeftBehind(since: baseline)
                _ = try daemon.stop()
                return (other, completed, leftBehind)
            }
        }.get()
        #expect(outcome.other == Array("+PONG\r\n".utf8))
        #expect(outcome.completed == [Array("+OK\r\n".utf8), Array("$10\r\nabcdefghij\r\n".utf8)])
        #expect(outcome.leftBehind == [], "descriptors left behind")
    }

    @Test("a client that never reads its replies: the daemon stops reading it past --max-output-bytes (memory stays bounded), serves others, and resumes once it reads")
    func clientThatNeverReads() async throws {
        let commands = underSanitizer ? 200_000 : 1_000_000
        let valueSize = 512
        let outcome: (sent: Int, growthKB: Int, other: [UInt8], answered: Int, allCorrect: Bool, after: [UInt8]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(arguments: ["--max-output-bytes", "16384"])
                let setup = try RawClient(port: daemon.port)
                _ = try setup.roundTrip(["SET", "big", String(repeating: "v", count: valueSize)])
                let baselineKB = daemon.process.residentKilobytes
                // Small socket buffers (set before connecting, so that TCP's window scale agrees
                // with them), so that the kernel holds little of what the daemon holds back.
                let reader = try RawClient(port: daemon.port, socketBuffers: 4096)
                _ = fcntl(reader.fd, F_SETFL, fcntl(reader.fd, F_GETFL) | O_NONBLOCK)
                // Send GETs without reading until the socket stays full: the daemon has stopped
                // reading. Without backpressure it would read all of them and queue
                // `commands` × 512 bytes of replies.
                let get = RawClient.encode(["GET", "big"])
                let chunk = Array((0..<1000).map { _ in get }.joined())
                var sent = 0
                while sent < commands * get.count {
                    let offset = sent % chunk.count
                    let n = chunk[offset...].withUnsafeBytes { send(reader.fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                    if n > 0 {
                        sent += n
                    } else if !pollReady(reader.fd, POLLOUT, before: .now + .seconds(2)) {
                        break
                    }
                }
                let growthKB = daemon.process.residentKilobytes - baselineKB
                let other = try RawClient(port: daemon.port).roundTrip(["PING"])
                _ = fcntl(reader.fd, F_SETFL, fcntl(reader.fd, F_GETFL) & ~O_NONBLOCK)
                // Every whole command is answered once the client reads; the one cut in half
                // by the full socket is answered once its end is sent.
                var expected = sent / get.count
                let value = Array("$\(valueSize)\r\n\(String(repeating: "v", count: valueSize))\r\n".utf8)
                var answered = 0, allCorrect = true
                let deadline = ContinuousClock.now + patience
                while answered < expected {
                    let batch = try reader.replies(min(1000, expected - answered), before: deadline)
                    allCorrect = allCorrect && batch.allSatisfy { $0 == value }
                    answered += batch.count
                }
                if sent % get.count != 0 {
                    try reader.send(Array(get[(sent % get.count)...]))
                    let last = try reader.replies(1)
                    allCorrect = allCorrect && last == [value]
                    expected += 1
                    answered += 1
                }
                let after = try reader.roundTrip(["PING"])
                _ = try daemon.stop()
                return (expected, growthKB, other, answered, allCorrect, after)
            }
        }.get()
        #expect(outcome.sent < commands, "the client sent every command: the daemon never stopped reading it")
        // What the daemon holds for that client is bounded by its limits (a read's worth of
        // commands, their replies, the output limit), not by what the client sends.
        #expect(outcome.growthKB < 64 * 1024, "the daemon grew by \(outcome.growthKB) KiB")
        #expect(outcome.other == Array("+PONG\r\n".utf8))
        #expect(outcome.answered == outcome.sent && outcome.allCorrect)
        #expect(outcome.after == Array("+PONG\r\n".utf8))
    }

    @Test("1,000 connections opened at once and dropped every way (mid-command, unread replies, reset): no crash, no descriptor left, service goes on")
    func thousandConnections() async throws {
        let count = underSanitizer ? 200 : 1000
        let outcome: (ping: [UInt8], leftBehind: [String], dbsize: [UInt8]) = try await onNewThread {
            Result {
                try raiseDescriptorLimit(to: count + 256)
                let daemon = try KVDaemon(shards: 2)
                let baseline = daemon.process.openDescriptors
                var clients: [RawClient] = []
                for index in 0..<count {
                    let client = try RawClient(port: daemon.port)
                    switch index % 5 {
                    case 0: try client.send(RawClient.encode(["SET", "c\(index)", "v"]))
                    case 1: try client.send(Array("*3\r\n$3\r\nSET\r\n$2\r\nhalf".utf8))
                    case 2: try client.send((0..<50).flatMap { _ in RawClient.encode(["GET", "c0"]) })
                    case 3:
                        // Closed with a reset (SO_LINGER 0) rather than a FIN.
                        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
                        setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
                        try client.send(RawClient.encode(["INCR", "resets"]))
                    default: break
                    }
                    clients.append(client)
                }
                let ping = try RawClient(port: daemon.port).roundTrip(["PING"])
                clients.forEach { $0.close() }
                clients.removeAll()
                let leftBehind = daemon.process.descriptorsLeftBehind(since: baseline)
                let dbsize = try RawClient(port: daemon.port).roundTrip(["EXISTS", "c0"])
                let (exit, _) = try daemon.stop()
                guard exit == .exited(0) else { throw TestFailure("kv-daemon \(exit)") }
                return (ping, leftBehind, dbsize)
            }
        }.get()
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
        #expect(outcome.leftBehind == [], "descriptors left behind")
        #expect(outcome.dbsize == Array(":1\r\n".utf8))
    }

    @Test("past --max-clients a connection gets Redis's error and is closed; out of descriptors, connections are shed and the daemon does not spin")
    func tooManyClients() async throws {
        let outcome: (refused: [UInt8], shed: Bool, ping: [UInt8], leftBehind: [String]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(arguments: ["--max-clients", "3"])
                let held = try (0..<3).map { _ in try RawClient(port: daemon.port) }
                for client in held { _ = try client.roundTrip(["PING"]) }
                let refused = try RawClient(port: daemon.port).readToEnd()
                _ = try daemon.stop()

                // A descriptor limit of 40 (the daemon cannot raise a hard limit), 20-odd of them
                // its own: connections past it are accepted and closed at once.
                let limited = try ChildProcess("/bin/sh", ["-c", "ulimit -n 40 && exec \"$0\" --port 0",
                                                           try builtExecutable("kv-daemon")])
                let ready = try limited.expectLine(startingWith: "ready port=")
                guard let port = readyPort(ready) else { throw TestFailure("unexpected ready line: \(ready)") }
                let baseline = limited.openDescriptors
                var clients: [RawClient] = []
                for _ in 0..<80 { clients.append(try RawClient(port: port)) }
                let shed = clients.last!.closedByPeer(before: .now + patience)
                clients.forEach { $0.close() }
                clients.removeAll()
                let leftBehind = limited.descriptorsLeftBehind(since: baseline)
                let ping = try RawClient(port: port).roundTrip(["PING"])
                limited.signal(SIGTERM)
                guard limited.waitForExit() == .exited(0) else { throw TestFailure("exit: \(limited.output)") }
                return (refused, shed, ping, leftBehind)
            }
        }.get()
        #expect(outcome.refused == Array("-ERR max number of clients reached\r\n".utf8))
        #expect(outcome.shed, "a connection past the descriptor limit was left open")
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
        #expect(outcome.leftBehind == [], "descriptors left behind")
    }
}

import Foundation
import PackageTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("kv-daemon under systemd")
struct SystemdTests {
    @Test("under systemd: READY=1 once serving, WATCHDOG=1 from the network thread's loop, STOPPING=1 on SIGTERM, exit 0")
    func notifyProtocol() async throws {
        let outcome: (ready: [String], exit: ChildProcess.Exit, ping: [UInt8], order: Bool) = try await onNewThread {
            Result {
                let socket = try NotifySocket()
                let daemon = try KVDaemon(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000"])
                let ready = try socket.waitFor("READY=1", within: patience)
                // Served by the time it said so.
                let ping = try RawClient(port: daemon.port).roundTrip(["PING"])
                for _ in 0..<3 { try socket.waitFor("WATCHDOG=1", within: patience) }
                daemon.process.signal(SIGTERM)
                try socket.waitFor("STOPPING=1", within: patience)
                try daemon.process.expectLine(startingWith: "stopped")
                let exit = daemon.process.waitForExit()
                let received = socket.received.withLock { $0 }
                let order = (received.firstIndex(of: "READY=1") ?? .max) < (received.firstIndex(of: "STOPPING=1") ?? -1)
                return (ready, exit, ping, order)
            }
        }.get()
        #expect(outcome.ready.contains { $0.hasPrefix("STATUS=Serving 127.0.0.1:") }, "\(outcome.ready)")
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
        #expect(outcome.exit == .exited(0))
        #expect(outcome.order)
    }

    @Test("socket activation: the daemon serves on the TCP socket systemd passed (LISTEN_FDS), a client that connected before it started included")
    func socketActivation() async throws {
        let replies: [[UInt8]] = try await onNewThread {
            Result {
                // What systemd does for a ListenStream=127.0.0.1:PORT socket unit: bind and listen.
                let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
                defer { close(listening) }
                var address = sockaddr_in()
                address.sin_family = sa_family_t(AF_INET)
                address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
                var length = socklen_t(MemoryLayout<sockaddr_in>.size)
                let bound = withUnsafeMutablePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                        bind(listening, $0, length) == 0 && listen(listening, 16) == 0 && getsockname(listening, $0, &length) == 0
                    }
                }
                guard bound else { throw TestFailure("bind: errno \(errno)") }
                let port = UInt16(bigEndian: address.sin_port)
                // Connected (into the backlog) and its request sent while no daemon runs.
                let early = try RawClient(port: port)
                try early.send(RawClient.encode(["SET", "early", "bird"]))
                let process = try ChildProcess(try builtExecutable("kv-daemon"), ["--port", "1"],
                                               listeningSocket: listening)
                let ready = try process.expectLine(startingWith: "ready port=")
                guard ready.hasPrefix("ready port=\(port) ") else { throw TestFailure("not on the passed socket: \(ready)") }
                var replies = try early.replies(1)
                replies.append(try RawClient(port: port).roundTrip(["GET", "early"]))
                process.signal(SIGTERM)
                guard process.waitForExit() == .exited(0) else { throw TestFailure("exit: \(process.output)") }
                return replies
            }
        }.get()
        #expect(replies == [Array("+OK\r\n".utf8), Array("$4\r\nbird\r\n".utf8)])
    }

    @Test("SIGTERM drains: a client pipelining commands gets every reply the daemon promised, in order, then EOF; exit 0")
    func drainOnSigterm() async throws {
        let outcome: (received: Int, inOrder: Bool, summary: String, exit: ChildProcess.Exit) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(shards: 2)
                let client = try RawClient(port: daemon.port)
                // Enough INCRs that the signal lands while many are read and not yet answered.
                let batch = (0..<1000).flatMap { _ in RawClient.encode(["INCR", "drained"]) }
                let sender = Thread {
                    for _ in 0..<(underSanitizer ? 20 : 200) {
                        guard (try? client.send(batch)) != nil else { return }
                    }
                }
                sender.start()
                _ = try client.replies(1)   // the daemon is busy with the stream
                daemon.process.signal(SIGTERM)
                let rest = try client.readToEnd()
                client.close()   // the daemon waits for its clients to leave once they have every reply
                let summary = try daemon.process.expectLine(startingWith: "stopped")
                let exit = daemon.process.waitForExit()
                // The replies are :1, :2, … — one per INCR the daemon read, none skipped.
                var expected = 2, offset = 0, inOrder = true
                let bytes = rest[...]
                while offset < bytes.count {
                    guard let length = RESP.replyLength(bytes[offset...]) else { inOrder = false; break }
                    if Array(bytes[offset..<(offset + length)]) != Array(":\(expected)\r\n".utf8) { inOrder = false; break }
                    expected += 1
                    offset += length
                }
                return (expected - 1, inOrder, summary, exit)
            }
        }.get()
        #expect(outcome.inOrder, "replies out of order or cut short")
        #expect(outcome.exit == .exited(0))
        #expect(outcome.summary == "stopped: \(outcome.received) replies, 0 connection(s) closed with replies unwritten",
                "the client received \(outcome.received) replies")
    }
}

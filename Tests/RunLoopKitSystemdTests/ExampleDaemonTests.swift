import Foundation
import PackageTestSupport
import RunLoopKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// End-to-end tests of `example-daemon` as a child process: a real AF_UNIX datagram socket
/// plays systemd's notify socket, real signals drive reload and shutdown.
@Suite("example-daemon")
struct ExampleDaemonTests {
    @Test("under systemd: READY=1, repeated WATCHDOG=1, example-client served 1,000 requests by name, reload, STOPPING=1 on SIGTERM, exit 0")
    func notifyProtocol() async throws {
        let socket = try NotifySocket()
        let (config, name) = try daemonConfiguration()
        defer { unlink(config) }
        let daemon = try DaemonProcess(environment: [
            "NOTIFY_SOCKET": socket.path,
            "WATCHDOG_USEC": "200000",          // keep-alive every 100 ms
        ], arguments: [config])

        let ready = try await socket.waitFor("READY=1", within: patience)
        #expect(ready.contains { $0.hasPrefix("STATUS=") }, "READY=1 comes with a STATUS=: \(ready)")
        for _ in 0..<3 {
            try await socket.waitFor("WATCHDOG=1", within: patience)
        }
        let clientDone = Locked(false)
        let started = try ExampleClientProcess(["--name", name, "--count", "1000", "--quiet"])
        let client = Task {
            defer { clientDone.withLock { $0 = true } }
            return await started.finish(timeout: .seconds(60))
        }
        // Keep reading the notify socket while the client runs, as systemd does: a full datagram
        // queue would block the daemon's next sd_notify.
        while !clientDone.withLock({ $0 }) {
            _ = await socket.nextDatagram(before: .now + .milliseconds(200))
        }
        let (clientExit, clientOutput) = await client.value
        #expect(clientExit == .exited(0), "\(clientOutput)")
        #expect(clientOutput.contains("done: 1000 correct replies"), "\(clientOutput)")
        try await socket.waitFor("WATCHDOG=1", within: patience)   // the loop kept its keep-alive going meanwhile

        daemon.send(SIGHUP)
        let reloading = try await socket.waitFor("RELOADING=1", within: patience)
        #expect(reloading.contains { $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil },
                "RELOADING=1 carries MONOTONIC_USEC= in the same datagram: \(reloading)")
        try await socket.waitFor("READY=1", within: patience)
        try await daemon.waitForLine(startingWith: "reloaded")
        try await socket.waitFor("WATCHDOG=1", within: patience)   // still alive after the reload

        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1", within: patience)
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "daemon \(exit); stdout: \(daemon.output.withLock { $0 })")
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary == "stopped: 1000 answered, 0 refused, 0 dropped, 0 unanswered", "every request answered: \(summary)")
        let stoppingIndex = socket.received.withLock { $0.firstIndex(of: "STOPPING=1") }
        let readyIndex = socket.received.withLock { $0.firstIndex(of: "READY=1") }
        #expect(readyIndex != nil && stoppingIndex != nil && readyIndex! < stoppingIndex!)
    }

    @Test("the daemon knows its clients as pinned processes: it logs each request's client and, through a ProcessExitSource, the client's exit")
    func pinnedClients() async throws {
        let (config, name) = try daemonConfiguration("log_requests = yes\n")
        defer { unlink(config) }
        let daemon = try DaemonProcess(environment: [:], arguments: [config])
        try await daemon.waitForLine(startingWith: "ready")
        let started = try ExampleClientProcess(["--name", name, "--count", "3"])
        let pid = started.process.processIdentifier
        let (clientExit, clientOutput) = await started.finish(timeout: .seconds(60))
        #expect(clientExit == .exited(0), "\(clientOutput)")
        let pinned = "from pid \(pid), uid \(geteuid()), gid \(getegid()) (process \(pid) ("
        let first = try await daemon.waitForLine(startingWith: "example-daemon: request 1 ")
        #expect(first.contains(pinned), "\(first)")
        let exited = try await daemon.waitForLine(startingWith: "example-daemon: client process \(pid) exited")
        #expect(exited.hasSuffix("after 3 request(s)"), "\(exited)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
    }

    @Test("without NOTIFY_SOCKET: runs, reloads and stops the same way, exit 0")
    func withoutSystemd() async throws {
        let daemon = try DaemonProcess(environment: ["WATCHDOG_USEC": "200000"])
        try await daemon.waitForLine(startingWith: "ready")
        daemon.send(SIGHUP)
        try await daemon.waitForLine(startingWith: "reloaded")
        daemon.send(SIGTERM)
        try await daemon.waitForLine(startingWith: "stopping")
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "daemon \(exit); stdout: \(daemon.output.withLock { $0 })")
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary.hasSuffix(" 0 unanswered"), "\(summary)")
    }

    @Test("example-client --distributed calls the daemon's service as a distributed actor; SIGTERM unpublishes it")
    func distributedClient() async throws {
        let (config, name) = try daemonConfiguration()
        defer { unlink(config) }
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": socket.path], arguments: [config])
        try await socket.waitFor("READY=1", within: patience)
        let client = try ExampleClientProcess(["--name", name, "--count", "3", "--distributed"])
        let (clientExit, clientOutput) = await client.finish()
        #expect(clientExit == .exited(0), "\(clientOutput)")
        // Each result is checked by the client against Wire.work; the lines show them.
        let results = clientOutput.split(separator: "\n").filter { $0.hasPrefix("result ") }
        #expect(results.map { $0.split(separator: ":").first.map(String.init) } == ["result 1", "result 2", "result 3"], "\(clientOutput)")
        #expect(clientOutput.contains("done: 3 correct results from \(name).actor"), "\(clientOutput)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
        // Once the daemon is gone, so is its actor: the client finds no actor by that name.
        let late = try ExampleClientProcess(["--name", name, "--count", "1", "--distributed"])
        let (lateExit, lateOutput) = await late.finish()
        #expect(lateExit == .exited(1), "\(lateOutput)")
        #expect(lateOutput.contains("no actor is published as \(name).actor"), "\(lateOutput)")
    }

    @Test("SIGTERM under steady load from example-client: every accepted request answered, exit 0")
    func drainsInFlightRequests() async throws {
        let (config, name) = try daemonConfiguration("status_interval_ms = 50\n")
        defer { unlink(config) }
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": socket.path], arguments: [config])
        try await socket.waitFor("READY=1", within: patience)
        // A client that would run for minutes keeps both workers busy, so SIGTERM lands mid-stream.
        let client = try ExampleClientProcess(["--name", name, "--count", "100000000", "--rounds", "20000", "--quiet"])
        let deadline = ContinuousClock.now + patience
        var flowing = false
        while !flowing, let lines = await socket.nextDatagram(before: deadline) {
            flowing = lines.contains { $0.hasPrefix("STATUS=Serving: ") && !$0.hasPrefix("STATUS=Serving: 0 answered") }
        }
        #expect(flowing, "STATUS= never reported answered requests: \(socket.received.withLock { $0 })")
        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1", within: patience)
        #expect(await daemon.waitForExit() == .exited(0))
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary.hasSuffix(" 0 unanswered"), "\(summary)")
        let answered = summary.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        #expect(answered > 0, "\(summary)")
        let (clientExit, clientOutput) = await client.finish(timeout: .seconds(120))
        #expect(clientExit == .exited(1), "the client reports the daemon going away: \(clientOutput)")
    }

    @Test("socket activation: a client started before the daemon is served once the daemon is up")
    func socketActivation() async throws {
        let (config, name) = try daemonConfiguration()
        defer { unlink(config) }
        // What systemd does for example-daemon.socket: bind the name in this user's scope and listen.
        let listening = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        try #require(listening >= 0)
        defer { close(listening) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array("runloopkit/\(geteuid())/\(name)".utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.baseAddress!.advanced(by: 1).copyMemory(from: bytes, byteCount: bytes.count) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) } }
        try #require(bound == 0 && listen(listening, 16) == 0, "errno \(errno)")

        let client = try ExampleClientProcess(["--name", name, "--count", "5"])
        // The client's connection waiting in the backlog makes the listening socket readable:
        // it connected (and waits for its answer) while no daemon runs. The daemon is started
        // on the same thread the moment that is seen: the client's handshake waits 30 s, and a
        // hop back through the cooperative pool (two threads, shared by every suite running at
        // once) could take that long under a sanitizer.
        let started: Result<DaemonProcess, any Error>? = await onNewThread {
            guard pollReady(listening, before: .now + patience) else { return nil }
            return Result { try DaemonProcess(environment: [:], arguments: [config], listeningSocket: listening,
                                              activationName: name) }
        }
        let daemon = try #require(started, "the client never connected").get()
        try await daemon.waitForLine(startingWith: "ready")
        let (clientExit, clientOutput) = await client.finish(timeout: .seconds(60))
        #expect(clientExit == .exited(0), "\(clientOutput)")
        #expect(clientOutput.contains("done: 5 correct replies"), "\(clientOutput)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
    }

    @Test("loop health: every loop's slow callouts are logged with the thread's name and the item's label (slow_callout_ms = 0 logs them all)")
    func logsSlowCalloutsOfEveryLoop() async throws {
        let (config, name) = try daemonConfiguration("slow_callout_ms = 0\n")
        defer { unlink(config) }
        let daemon = try DaemonProcess(environment: [:], arguments: [config])
        try await daemon.waitForLine(startingWith: "ready")
        let (clientExit, clientOutput) = try await ExampleClientProcess(["--name", name, "--count", "1", "--quiet"]).finish()
        #expect(clientExit == .exited(0), "\(clientOutput)")
        daemon.send(SIGTERM)
        try await daemon.waitForLine(startingWith: "stopped")
        let lines = daemon.output.withLock { $0 }
        // Request 1 goes to worker-2 (round-robin from the first id).
        for expected in ["example-daemon: slow callout on example-daemon: port \"service\" msgid 1 in ",
                         "example-daemon: slow callout on worker-2: port \"worker-2 inbox\" msgid 1 in ",
                         "example-daemon: slow callout on example-daemon: port \"done\" msgid 3 in ",
                         "example-daemon: slow callout on example-daemon: signal \"signals\" in "] {
            #expect(lines.contains { $0.hasPrefix(expected) }, "no line '\(expected)…' in \(lines)")
        }
        #expect(await daemon.waitForExit() == .exited(0))
    }
}

import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// End-to-end tests of `example-daemon` as a child process: a real AF_UNIX datagram socket
/// plays systemd's notify socket, real signals drive reload and shutdown.
@Suite("example-daemon")
struct ExampleDaemonTests {
    @Test("under systemd: READY=1, repeated WATCHDOG=1, reload, STOPPING=1 on SIGTERM, exit 0")
    func notifyProtocol() async throws {
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(environment: [
            "NOTIFY_SOCKET": socket.path,
            "WATCHDOG_USEC": "200000",          // keep-alive every 100 ms
        ])

        let ready = try await socket.waitFor("READY=1")
        #expect(ready.contains { $0.hasPrefix("STATUS=") }, "READY=1 comes with a STATUS=: \(ready)")
        for _ in 0..<3 {
            try await socket.waitFor("WATCHDOG=1")
        }

        daemon.send(SIGHUP)
        let reloading = try await socket.waitFor("RELOADING=1")
        #expect(reloading.contains { $0.hasPrefix("MONOTONIC_USEC=") && UInt64($0.dropFirst(15)) != nil },
                "RELOADING=1 carries MONOTONIC_USEC= in the same datagram: \(reloading)")
        try await socket.waitFor("READY=1")
        try await daemon.waitForLine(startingWith: "reloaded")
        try await socket.waitFor("WATCHDOG=1")   // still alive after the reload

        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1")
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "daemon \(exit); stdout: \(daemon.output.withLock { $0 })")
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary.hasSuffix(" 0 unanswered"), "every accepted request answered: \(summary)")
        let stoppingIndex = socket.received.withLock { $0.firstIndex(of: "STOPPING=1") }
        let readyIndex = socket.received.withLock { $0.firstIndex(of: "READY=1") }
        #expect(readyIndex != nil && stoppingIndex != nil && readyIndex! < stoppingIndex!)
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

    @Test("SIGTERM under steady load: every accepted request answered, exit 0")
    func drainsInFlightRequests() async throws {
        // A request every millisecond keeps both workers busy, so SIGTERM lands mid-stream.
        let config = FileManager.default.temporaryDirectory
            .appendingPathComponent("rlk-daemon-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).conf")
        try "request_interval_ms = 1\nstatus_interval_ms = 50\n".write(to: config, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: config) }
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": socket.path], arguments: [config.path])
        try await socket.waitFor("READY=1")
        // Wait until a STATUS= reports answered requests, i.e. traffic is flowing.
        let deadline = ContinuousClock.now + patience
        var flowing = false
        while !flowing, let lines = await socket.nextDatagram(before: deadline) {
            flowing = lines.contains { $0.hasPrefix("STATUS=Serving: ") && !$0.hasPrefix("STATUS=Serving: 0 answered") }
        }
        #expect(flowing, "STATUS= never reported answered requests: \(socket.received.withLock { $0 })")
        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1")
        #expect(await daemon.waitForExit() == .exited(0))
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary.hasSuffix(" 0 unanswered"), "\(summary)")
        let answered = summary.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        #expect(answered > 0, "\(summary)")
    }
}

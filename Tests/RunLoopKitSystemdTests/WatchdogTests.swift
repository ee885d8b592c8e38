import Foundation
import PackageTestSupport
import RunLoopKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// `WatchdogKeepAlive(watching:)` under a fake systemd: watchdog-host's keep-alive watches its
/// main loop and its worker's, and signals wedge and unwedge the worker.
@Suite("WatchdogKeepAlive watching loops")
struct WatchdogTests {
    @Test("a daemon whose worker loop is wedged sends no WATCHDOG=1 after the wedge while its main loop still runs; unwedged, it pings again")
    func wedgedWorkerStopsThePings() async throws {
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(executable: "WatchdogHost", environment: [
            "NOTIFY_SOCKET": socket.path,
            "WATCHDOG_USEC": "200000",          // a ping every 100 ms
        ])
        try await socket.waitFor("READY=1", within: patience)
        try await socket.waitFor("WATCHDOG=1", within: patience)
        try await socket.waitFor("WATCHDOG=1", within: patience)   // both loops turn: pings

        daemon.send(SIGUSR1)
        try await daemon.waitForLine(startingWith: "wedged")
        // The keep-alive says on the socket when it first withholds a ping: every datagram after
        // that one was sent after the wedge was seen.
        try await socket.waitFor("STATUS=withheld: worker", within: patience)
        var ticks = 0
        while ticks < 20 {                      // a second of the main loop's ticks: ten ping periods
            let lines = try #require(await socket.nextDatagram(before: .now + patience),
                                     "the main loop stopped sending STATUS=tick: \(socket.received.withLock { $0 })")
            #expect(!lines.contains("WATCHDOG=1"), "a ping while the worker was wedged")
            if lines.contains("STATUS=tick") { ticks += 1 }
        }

        daemon.send(SIGUSR2)
        try await daemon.waitForLine(startingWith: "unwedged")
        try await socket.waitFor("WATCHDOG=1", within: patience)

        daemon.send(SIGTERM)
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "watchdog-host \(exit); stdout: \(daemon.output.withLock { $0 })")
    }
}

import Foundation
import PackageTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What one client's request can make kv-daemon hold, and what it keeps once the client is gone,
/// read from the daemon's /proc/<pid>/status.
@Suite("kv-daemon memory per request")
struct MemoryTests {
    static let limit = 16 << 20

    @Test("a header of 100 M arguments followed by 1-byte strings is cut at --max-request-bytes, counting what each argument costs to hold: the daemon's peak memory grows by less than the limit")
    func hostileArrayCutAtTheLimit() async throws {
        let outcome: (cut: Bool, growthKiB: Int, ping: [UInt8]) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(arguments: ["--max-bulk-bytes", "65536", "--max-request-bytes", "\(Self.limit)"])
                _ = try RawClient(port: daemon.port).roundTrip(["PING"])
                let baseline = try daemon.process.resetPeakMemory()
                let hostile = try RawClient(port: daemon.port)
                let chunk = Array(String(repeating: "$1\r\nx\r\n", count: 64 * 1024).utf8)
                var sent = 0
                do {
                    try hostile.send(Array("*100000000\r\n".utf8))
                    // Four times the limit: the daemon must have cut the connection long before.
                    while sent < 4 * Self.limit {
                        try hostile.send(chunk)
                        sent += chunk.count
                    }
                } catch {}   // the daemon closed the connection
                let cut = hostile.closedByPeer(before: .now + patience)
                let ping = try RawClient(port: daemon.port).roundTrip(["PING"])
                let growth = daemon.process.memory("VmHWM") - baseline
                _ = try daemon.stop()
                return (cut, growth, ping)
            }
        }.get()
        #expect(outcome.cut, "the hostile request kept its connection (peak RSS grew by \(outcome.growthKiB) KiB)")
        #expect(outcome.growthKiB < Self.limit / 1024, "peak RSS grew by \(outcome.growthKiB) KiB for a \(Self.limit / 1024) KiB limit")
        #expect(outcome.ping == Array("+PONG\r\n".utf8))
    }

    @Test("memory comes back when a connection that held a large request closes: RSS back within 3 MiB of before")
    func memoryBackAfterClose() async throws {
        let outcome: (grewKiB: Int, leftKiB: Int) = try await onNewThread {
            Result {
                let daemon = try KVDaemon(arguments: ["--max-bulk-bytes", "65536", "--max-request-bytes", "\(Self.limit)"])
                _ = try RawClient(port: daemon.port).roundTrip(["PING"])
                let baseline = daemon.process.residentKilobytes
                // A request within the limit (600,000 arguments of 1 byte, 22 bytes each to hold
                // at most), all but its last argument: the daemon holds it, waiting for the rest.
                let count = 600_000
                let client = try RawClient(port: daemon.port)
                try client.send(Array("*\(count)\r\n".utf8) + Array(String(repeating: "$1\r\nx\r\n", count: count - 1).utf8))
                var grew = 0
                _ = eventually {
                    grew = daemon.process.residentKilobytes - baseline
                    return grew > 8 * 1024
                }
                client.close()
                var left = 0
                _ = eventually {
                    left = daemon.process.residentKilobytes - baseline
                    return left < 3 * 1024
                }
                _ = try daemon.stop()
                return (grew, left)
            }
        }.get()
        #expect(outcome.grewKiB > 8 * 1024, "the request was held (RSS grew by \(outcome.grewKiB) KiB, \(outcome.leftKiB) KiB left)")
        #expect(outcome.leftKiB < 3 * 1024, "RSS stayed \(outcome.leftKiB) KiB above its level before the request")
    }
}

extension ChildProcess {
    /// A field of /proc/<pid>/status in KiB (VmRSS, VmHWM), or -1.
    func memory(_ field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return -1 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
    }

    /// Resets the peak RSS (VmHWM) to the current RSS (clear_refs, Linux 4.0) and returns it.
    func resetPeakMemory() throws -> Int {
        let fd = open("/proc/\(pid)/clear_refs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { throw TestFailure("open /proc/\(pid)/clear_refs: errno \(errno)") }
        defer { close(fd) }
        guard write(fd, "5", 1) == 1 else { throw TestFailure("write clear_refs: errno \(errno)") }
        return memory("VmHWM")
    }
}

import Foundation
import RunLoopKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The introspection rows (fourth-round bars): RunLoopKit's ping-pong and stream with
/// `Introspection` enabled and no tool attached — alternating, in one process, with the same
/// exchange without it — and the stream with a `runloopctl monitor` client attached, which
/// must keep at least half the rate and lose no message.
enum IntrospectionPeer {
    static func pingPong(_ plan: LatencyPlan) -> LatencyMeasurement {
        let enabled = IntrospectionOn()
        defer { enabled.off() }
        return RunLoopKitPeer.pingPong(plan)
    }

    static func throughput(_ plan: StreamPlan, monitored: Bool) -> StreamMeasurement {
        let enabled = IntrospectionOn()
        defer { enabled.off() }
        // The stream verifies every message itself; the monitor's own account goes to stderr
        // once, when the case's process exits (a row runs many segments).
        let monitor = monitored ? MonitorClient() : nil
        let measurement = RunLoopKitPeer.throughput(plan)
        if let monitor {
            let (records, dropped) = monitor.finish()
            MonitorAccount.add(records: records, dropped: dropped)
        }
        return measurement
    }
}

/// What the monitor clients of one case's process received and were told was dropped.
private enum MonitorAccount {
    private static let totals = Mutex<(records: Int, dropped: Int, reported: Bool)>((0, 0, false))

    static func add(records: Int, dropped: Int) {
        let first = totals.withLock { totals in
            totals.records += records
            totals.dropped += dropped
            defer { totals.reported = true }
            return !totals.reported
        }
        if first { atexit { MonitorAccount.report() } }
    }

    private static func report() {
        let (records, dropped, _) = totals.withLock { $0 }
        let line = "monitor: \(records) records received, \(dropped) reported dropped (a record per send and per "
            + "delivery; the process keeps 4,096 per monitor and never blocks on it)\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}

/// `Introspection.enable()` for one segment; the segment without it runs alternately.
private struct IntrospectionOn {
    init() {
        do throws(PortError) { try Introspection.enable() } catch { fail("Introspection.enable(): \(error)") }
    }

    func off() { Introspection.disable() }
}

/// What `runloopctl monitor` does (Protocols/introspection.md §4.2), inside the benchmark's
/// process: connects to its own endpoint, asks for `monitor` and reads every record on a
/// thread of its own, counting the records and the drops the process reports.
private final class MonitorClient: @unchecked Sendable {
    private let fd: Int32
    private let counts = Mutex<(records: Int, dropped: Int)>((0, 0))
    private var reader = pthread_t()

    init() {
        fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { fail("monitor: socket: \(String(cString: strerror(errno)))") }
        let name = Array("runloopkit-introspection/\(getpid())".utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path[0] = 0
            path.baseAddress!.advanced(by: 1).copyMemory(from: name, byteCount: name.count)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard connected == 0 else { fail("monitor: connect: \(String(cString: strerror(errno)))") }
        let request = Array("monitor".utf8)
        guard send(fd, request, request.count, Int32(MSG_NOSIGNAL)) == request.count else {
            fail("monitor: send: \(String(cString: strerror(errno)))")
        }
        var answer = [UInt8](repeating: 0, count: 4096)
        let count = recv(fd, &answer, answer.count, 0)
        guard count > 0, String(decoding: answer[0..<count], as: UTF8.self).hasPrefix("{\"monitoring\":") else {
            fail("monitor: the endpoint did not start monitoring")
        }
        let started = pthread_create(&reader, nil, { context in
            Unmanaged<MonitorClient>.fromOpaque(context!).takeUnretainedValue().readUntilClosed()
            return nil
        }, Unmanaged.passUnretained(self).toOpaque())
        guard started == 0 else { fail("monitor: pthread_create: \(started)") }
    }

    /// Reads records until the endpoint closes the connection (at `Introspection.disable()`).
    private func readUntilClosed() {
        var buffer = [UInt8](repeating: 0, count: 1 << 17)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            let record = buffer[0..<count]
            if record.starts(with: Array("{\"dropped\":".utf8)) {
                let digits = record.dropFirst(11).prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
                let dropped = Int(String(decoding: digits, as: UTF8.self)) ?? 0
                counts.withLock { $0.dropped += dropped }
            } else {
                counts.withLock { $0.records += 1 }
            }
        }
    }

    /// Disables introspection (which closes the monitor's connection once its records are out)
    /// and returns what the reader counted.
    func finish() -> (records: Int, dropped: Int) {
        Introspection.disable()
        pthread_join(reader, nil)
        close(fd)
        return counts.withLock { $0 }
    }
}

import Foundation
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// A datagram AF_UNIX socket bound to a fresh path: what systemd listens on for sd_notify.
///
/// A reader thread drains it as datagrams come, not only while a test waits for one: sd_notify
/// blocks once the socket holds net.unix.max_dgram_qlen (10) unread datagrams, and a daemon's
/// loop blocked there would handle no signal (a test busy elsewhere, or short of CPU in a
/// parallel run, lets that happen with a daemon that sends STATUS= every 50 ms).
package final class NotifySocket: Sendable {
    package let path: String
    package let fd: Int32
    /// Every assignment taken so far by `nextDatagram` and `waitFor`, in order.
    package let received = Locked<[String]>([])
    /// Datagrams read but not yet taken, in order, and one signal each.
    private let queued = Locked<[[String]]>([])
    private let arrivals = DispatchSemaphore(value: 0)
    private let readerDone = DispatchSemaphore(value: 0)

    package init() throws {
        // sun_path holds 107 bytes: fall back to /tmp when $TMPDIR is deep.
        let name = "rlk-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let preferred = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        path = preferred.utf8.count < 100 ? preferred : "/tmp/" + name
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else {
            close(fd)
            throw TestFailure("path too long: \(path)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else {
            close(fd)
            throw TestFailure("bind \(path): errno \(errno)")
        }
        let thread = Thread { [fd, queued, arrivals, readerDone] in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = recv(fd, &buffer, buffer.count, 0)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                let lines = String(decoding: buffer[..<n], as: UTF8.self).split(separator: "\n").map(String.init)
                queued.withLock { $0.append(lines) }
                arrivals.signal()
            }
            readerDone.signal()
        }
        thread.name = "notify-reader"
        thread.start()
    }

    deinit {
        // The reader returns from recv once the socket is shut down; only then is the number
        // closed (it could otherwise be another test's socket by the reader's next recv).
        shutdown(fd, Int32(SHUT_RDWR))
        readerDone.wait()
        close(fd)
        unlink(path)
    }

    /// The next datagram's assignments, or nil when none arrived before `deadline`. Blocks the
    /// calling thread.
    package func nextDatagram(before deadline: ContinuousClock.Instant) -> [String]? {
        let left = max(0, ContinuousClock.now.duration(to: deadline) / .milliseconds(1))
        guard arrivals.wait(timeout: .now() + .milliseconds(Int(left))) == .success else { return nil }
        let lines = queued.withLock { $0.removeFirst() }
        received.withLock { $0.append(contentsOf: lines) }
        return lines
    }

    /// The next datagram's assignments, or nil when none arrived before `deadline`; waits on a
    /// thread of its own, not on the concurrency pool.
    package func nextDatagram(before deadline: ContinuousClock.Instant) async -> [String]? {
        await onNewThread("notify-wait") { [self] in nextDatagram(before: deadline) }
    }

    /// Takes datagrams until one holds `assignment` (a whole line such as "READY=1"); returns
    /// that datagram's lines. Throws after `patience`. Blocks the calling thread.
    @discardableResult
    package func waitFor(_ assignment: String, within patience: Duration) throws -> [String] {
        let deadline = ContinuousClock.now + patience
        while let lines = nextDatagram(before: deadline) {
            if lines.contains(assignment) { return lines }
        }
        throw TestFailure("no \(assignment) within \(patience); received: \(received.withLock { $0 })")
    }

    /// `waitFor(_:within:)` on a thread of its own, not on the concurrency pool.
    @discardableResult
    package func waitFor(_ assignment: String, within patience: Duration) async throws -> [String] {
        try await onNewThread("notify-wait") { [self] in Result { try waitFor(assignment, within: patience) } }.get()
    }
}

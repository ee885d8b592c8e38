import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A connection to a process's introspection endpoint (Protocols/introspection.md): the
/// abstract address `runloopkit-introspection/<pid>`, whose listener must be that pid (the
/// abstract namespace has no permissions: anyone could bind it).
final class Endpoint {
    let fd: Int32
    let pid: Int32
    /// One record's room, reused: a trace receives many.
    private var buffer = [UInt8](repeating: 0, count: 8 << 20)

    init(pid: Int32) throws {
        self.pid = pid
        fd = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure("socket: \(String(cString: strerror(errno)))") }
        let name = Array("runloopkit-introspection/\(pid)".utf8)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { path in
            path[0] = 0
            path.baseAddress!.advanced(by: 1).copyMemory(from: name, byteCount: name.count)
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, length) }
        }
        guard result == 0 else {
            let error = errno
            close(fd)
            if error == ECONNREFUSED || error == ENOENT {
                throw Failure(kill(pid, 0) == 0 || errno == EPERM
                    ? "process \(pid) does not have introspection on (Introspection.enable() or RUNLOOPKIT_INTROSPECTION=1)"
                    : "no process \(pid)")
            }
            throw Failure("connect to process \(pid): \(String(cString: strerror(error)))")
        }
        // struct ucred: pid, uid, gid.
        var credentials: (Int32, UInt32, UInt32) = (0, 0, 0)
        var size = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) == 0, credentials.0 == pid else {
            close(fd)
            throw Failure("the introspection endpoint of process \(pid) is held by another process")
        }
    }

    deinit { close(fd) }

    func send(_ request: String) throws {
        let bytes = Array(request.utf8)
        guard Glibc.send(fd, bytes, bytes.count, Int32(MSG_NOSIGNAL)) == bytes.count else {
            throw Failure("send to process \(pid): \(String(cString: strerror(errno)))")
        }
    }

    /// The next record, nil at end of stream; `timeout` nil waits for ever.
    func receive(timeout: Duration? = .seconds(10)) throws -> [String: Any]? {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = timeout.map { Int32(clamping: $0.components.seconds * 1000 + $0.components.attoseconds / 1_000_000_000_000_000) } ?? -1
        while true {
            let n = poll(&entry, 1, milliseconds)
            if n > 0 { break }
            if n == 0 { throw Failure("process \(pid) did not answer in time") }
            if errno != EINTR { throw Failure("poll: \(String(cString: strerror(errno)))") }
        }
        var count = recv(fd, &buffer, buffer.count, 0)
        if count < 0 && errno == ECONNRESET {
            // The endpoint closed with our request unread (it refused us before reading it): the
            // kernel reports the reset first, and its answer is still queued behind it.
            count = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
            if count < 0 { return nil }
        }
        guard count >= 0 else { throw Failure("receive from process \(pid): \(String(cString: strerror(errno)))") }
        if count == 0 { return nil }
        guard let object = try? JSONSerialization.jsonObject(with: Data(buffer[..<count])) as? [String: Any] else {
            throw Failure("process \(pid) sent a malformed answer")
        }
        if let error = object["error"] as? String { throw Failure(error) }
        return object
    }

    /// Sends `request` and returns the one answer.
    static func ask(_ pid: Int32, _ request: String) throws -> [String: Any] {
        let endpoint = try Endpoint(pid: pid)
        // A refused peer finds the refusal waiting and its send failing: the refusal says why.
        var sendFailure: Error?
        do { try endpoint.send(request) } catch { sendFailure = error }
        guard let answer = try endpoint.receive() else {
            throw sendFailure ?? Failure("process \(pid) closed the connection")
        }
        return answer
    }
}

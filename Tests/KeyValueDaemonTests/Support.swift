import Foundation
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How long any wait in these tests may take before it counts as a failure. Generous: it
/// bounds a hang, it is never a timing threshold (2 shared cores, debug and sanitizer builds).
let patience: Duration = .seconds(30)

/// Set by the sanitizer runs of CI: the tests scale their counts down.
let underSanitizer = getenv("RUNLOOPKIT_SANITIZER") != nil

/// Raises this process's soft limit on open descriptors to at least `needed` (the tests open a
/// thousand connections at once; CI's default soft limit is often 1,024).
func raiseDescriptorLimit(to needed: Int) throws {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw TestFailure("getrlimit: errno \(errno)") }
    guard limit.rlim_cur < rlim_t(needed) else { return }
    guard limit.rlim_max >= rlim_t(needed) else {
        throw TestFailure("this test needs \(needed) descriptors, the hard limit is \(limit.rlim_max) (ulimit -Hn)")
    }
    limit.rlim_cur = rlim_t(needed)
    guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0 else { throw TestFailure("setrlimit: errno \(errno)") }
}

/// Polls `condition` every 10 ms until it holds or `patience` passes.
func eventually(_ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + patience
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(10_000)
    }
    return true
}

// MARK: - The Redis tools

/// redis-server, redis-cli and redis-benchmark, found on PATH. The tests that use them fail,
/// never skip, when they are missing: CI installs them.
enum RedisTools {
    static func path(of tool: String) throws -> String {
        let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":")
        for directory in directories + ["/usr/bin", "/usr/local/bin", "/usr/sbin"] {
            let candidate = "\(directory)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw TestFailure("""
            \(tool) not found on PATH: these tests run kv-daemon beside the real Redis tools. Install them \
            (Debian/Ubuntu: apt-get install redis-server redis-tools; .ci/run installs them)
            """)
    }
}

// MARK: - Processes

/// A child process started with posix_spawn, its stdout and stderr on a socketpair the test
/// reads line by line. Killed (and reaped) on deinit if still running.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    let executable: String
    private let outputFD: Int32
    private let lock = NSLock()
    private var buffered: [UInt8] = []
    private var lines: [String] = []
    private var reaped = false
    private var status: Int32 = 0

    /// Starts `path` with `arguments`; the environment is the test's minus the systemd
    /// variables, plus `environment`. Signals are reset to their defaults and unblocked.
    /// `listeningSocket` becomes descriptor 3 with LISTEN_FDS=1, LISTEN_FDNAMES=`activationName`
    /// and LISTEN_PID the child's pid, as systemd passes a socket (through a shell that sets
    /// LISTEN_PID=$$ and then execs the program, keeping its pid).
    init(_ path: String, _ arguments: [String], environment: [String: String] = [:],
         listeningSocket: Int32? = nil, activationName: String = "kv-daemon") throws {
        executable = path
        (pid, outputFD) = try spawnDaemon(path, arguments, environment: environment, listeningSocket: listeningSocket,
                                          activationName: activationName)
    }

    deinit {
        if !hasExited {
            kill(pid, SIGKILL)
            _ = waitForExit()
        }
        close(outputFD)
    }

    var hasExited: Bool { lock.withLock { reaped } }

    func signal(_ signal: Int32) {
        lock.withLock { if !reaped { kill(pid, signal) } }
    }

    /// Every line the process printed so far (reads what is waiting, without blocking).
    var output: [String] {
        _ = readLine(startingWith: "\u{0}", before: .now)
        return lock.withLock { lines }
    }

    /// Reads output until a line starting with `prefix`; nil after `deadline` or at EOF.
    func readLine(startingWith prefix: String, before deadline: ContinuousClock.Instant) -> String? {
        while true {
            let found: String? = lock.withLock {
                while let newline = buffered.firstIndex(of: UInt8(ascii: "\n")) {
                    let line = String(decoding: buffered[..<newline], as: UTF8.self)
                    buffered.removeSubrange(...newline)
                    lines.append(line)
                    if line.hasPrefix(prefix) { return line }
                }
                return nil
            }
            if let found { return found }
            guard pollReady(outputFD, before: deadline) else { return nil }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = read(outputFD, &chunk, chunk.count)
            guard n > 0 else { return nil }
            lock.withLock { buffered += chunk[..<n] }
        }
    }

    /// Like `readLine`, but throws with the output so far when the line never comes.
    @discardableResult
    func expectLine(startingWith prefix: String) throws -> String {
        guard let line = readLine(startingWith: prefix, before: .now + patience) else {
            throw TestFailure("\(executable): no line '\(prefix)…' within \(patience); output: \(output)")
        }
        return line
    }

    enum Exit: Equatable, CustomStringConvertible {
        case exited(Int32), signalled(Int32), timedOut
        var description: String {
            switch self {
            case .exited(let code): "exited with status \(code)"
            case .signalled(let signal): "killed by signal \(signal)"
            case .timedOut: "still running after \(patience) (killed)"
            }
        }
    }

    /// Waits for the process to exit (killing it after `patience`) and reaps it.
    @discardableResult
    func waitForExit() -> Exit {
        let deadline = ContinuousClock.now + patience
        var timedOut = false
        var status: Int32 = 0
        while true {
            // Reaped under the lock, so that `signal` never reaches a process that took the pid.
            let done: Bool = lock.withLock {
                if reaped { return true }
                let rc = waitpid(pid, &status, WNOHANG)
                if rc == pid || (rc < 0 && errno != EINTR) { reaped = true }
                return reaped
            }
            if done { break }
            if ContinuousClock.now >= deadline && !timedOut {
                timedOut = true
                signal(SIGKILL)
            }
            usleep(5_000)
        }
        if timedOut { return .timedOut }
        // WIFEXITED/WEXITSTATUS/WTERMSIG are macros Swift does not import.
        if status & 0x7f == 0 { return .exited((status >> 8) & 0xff) }
        return .signalled(status & 0x7f)
    }

    /// The process's open descriptors, each number with what it refers to (from /proc); nil
    /// once the process is gone.
    var openDescriptors: [String: String]? {
        let directory = "/proc/\(pid)/fd"
        guard let numbers = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return nil }
        var descriptors: [String: String] = [:]
        for number in numbers {
            descriptors[number] = (try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(number)")) ?? "?"
        }
        return descriptors
    }

    /// The sockets open now that were not in `baseline` (a new number, or a number reused for
    /// another socket), as "N -> socket:[inode]", once that settles to nothing or `patience`
    /// passes. Sockets only: they are what clients can leave behind, while the daemon's own
    /// start-up may still be opening other descriptors (a loop's eventfd, the runtime's) when
    /// the baseline is read.
    func descriptorsLeftBehind(since baseline: [String: String]?) -> [String] {
        var left: [String] = []
        _ = eventually {
            guard let baseline, let now = openDescriptors else {
                left = ["/proc/\(pid)/fd unreadable: the process is gone"]
                return false
            }
            left = now.filter { $0.value.hasPrefix("socket:") && baseline[$0.key] != $0.value }.map { "\($0.key) -> \($0.value)" }.sorted()
            return left.isEmpty
        }
        return left
    }

    /// Resident memory in KiB (VmRSS).
    var residentKilobytes: Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return -1 }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true)[1]) ?? -1
    }
}

// MARK: - The servers

/// kv-daemon as a child process, on a port the kernel chose (read from its "ready" line).
final class KVDaemon: Sendable {
    let process: ChildProcess
    let port: UInt16

    init(shards: Int = 1, arguments: [String] = [], environment: [String: String] = [:]) throws {
        process = try ChildProcess(try builtExecutable("kv-daemon"),
                                   ["--port", "0", "--shards", "\(shards)"] + arguments, environment: environment)
        let ready = try process.expectLine(startingWith: "ready port=")
        guard let port = readyPort(ready) else {
            throw TestFailure("unexpected ready line: \(ready)")
        }
        self.port = port
    }

    /// SIGTERM, then the exit and the "stopped" line.
    func stop() throws -> (ChildProcess.Exit, String) {
        process.signal(SIGTERM)
        let summary = try process.expectLine(startingWith: "stopped")
        return (process.waitForExit(), summary)
    }
}

/// The port of kv-daemon's "ready port=N shards=M" line.
func readyPort(_ line: String) -> UInt16? {
    let words = line.split(separator: " ")
    guard words.count >= 2, words[0] == "ready", words[1].hasPrefix("port=") else { return nil }
    return UInt16(words[1].dropFirst("port=".count))
}

/// redis-server on a free port, with no persistence and a directory of its own.
final class RedisServer: Sendable {
    let process: ChildProcess
    let port: UInt16
    let directory: String

    init(arguments: [String] = []) throws {
        let server = try RedisTools.path(of: "redis-server")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("kv-redis-\(getpid())-\(UInt32.random(in: 0...UInt32.max))").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        // A free port: bound and released by the test; redis-server takes it a moment later.
        port = try freePort()
        process = try ChildProcess(server, ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                            "--dir", directory, "--daemonize", "no", "--loglevel", "warning"] + arguments)
        let deadline = ContinuousClock.now + patience
        while true {
            if let client = try? RawClient(port: port), (try? client.roundTrip(["PING"])) == Array("+PONG\r\n".utf8) { break }
            if process.hasExited || ContinuousClock.now >= deadline {
                throw TestFailure("redis-server did not start on port \(port): \(process.output)")
            }
            usleep(20_000)
        }
    }

    deinit {
        process.signal(SIGKILL)
        process.waitForExit()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// A port no one listens on now.
func freePort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let rc = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
            bind(fd, pointer, length) == 0 ? getsockname(fd, pointer, &length) : -1
        }
    }
    guard rc == 0 else { throw TestFailure("no free port: errno \(errno)") }
    return UInt16(bigEndian: address.sin_port)
}

// MARK: - A raw client

/// A TCP connection to 127.0.0.1 that sends bytes as given and reads replies framed as RESP2,
/// so a test sees exactly what a server wrote.
final class RawClient: @unchecked Sendable {
    let fd: Int32
    private var pending: [UInt8] = []
    private var closed = false

    /// Connects to 127.0.0.1:`port`; with `socketBuffers`, the socket's send and receive
    /// buffers are set to that size first.
    init(port: UInt16, socketBuffers: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        if var size = socketBuffers {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            let code = errno
            // Through `close()`, which marks the client closed: the object is whole, so throwing
            // runs deinit, whose second close(2) would hit whatever took the number meanwhile
            // (another test's socket).
            close()
            throw TestFailure("connect to port \(port): \(String(cString: strerror(code)))")
        }
    }

    deinit {
        close()
    }

    func close() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }

    /// One command as a RESP array of bulk strings.
    static func encode(_ arguments: [[UInt8]]) -> [UInt8] {
        var bytes = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments {
            bytes += Array("$\(argument.count)\r\n".utf8) + argument + [13, 10]
        }
        return bytes
    }

    static func encode(_ arguments: [String]) -> [UInt8] {
        encode(arguments.map { Array($0.utf8) })
    }

    /// Sends all of `bytes`; throws if the server has not taken them by `deadline` (a server
    /// that stopped reading fails the test rather than hanging it).
    func send(_ bytes: [UInt8], before deadline: ContinuousClock.Instant = .now + patience) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT))
            }
            if n > 0 {
                offset += n
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && errno == EAGAIN {
                guard pollReady(fd, POLLOUT, before: deadline) else {
                    throw TestFailure("send: the server took \(offset) of \(bytes.count) bytes before the deadline")
                }
            } else {
                throw TestFailure("send: \(String(cString: strerror(errno)))")
            }
        }
    }

    /// Reads until `count` complete replies are in; returns each one's bytes.
    func replies(_ count: Int, before deadline: ContinuousClock.Instant = .now + patience) throws -> [[UInt8]] {
        var result: [[UInt8]] = []
        var taken = 0
        defer { pending.removeFirst(taken) }
        while result.count < count {
            if let length = RESP.replyLength(pending[taken...]) {
                result.append(Array(pending[taken..<(taken + length)]))
                taken += length
                continue
            }
            pending.removeFirst(taken)
            taken = 0
            guard try fill(before: deadline) else {
                throw TestFailure("\(result.count) of \(count) replies before EOF or the deadline; partial: \(RESP.show(pending))")
            }
        }
        return result
    }

    func roundTrip(_ command: [String]) throws -> [UInt8] {
        try send(Self.encode(command))
        return try replies(1)[0]
    }

    /// Everything until the server closes the connection; throws if it has not by `deadline`.
    func readToEnd(before deadline: ContinuousClock.Instant = .now + patience) throws -> [UInt8] {
        while try fill(before: deadline) {}
        defer { pending = [] }
        return pending
    }

    /// Whether the server closed the connection within `deadline` (any bytes before are kept).
    func closedByPeer(before deadline: ContinuousClock.Instant) -> Bool {
        while true {
            guard let more = try? fill(before: deadline) else { return false }
            if !more { return true }
        }
    }

    /// One read into `pending`: true when bytes came, false at EOF; throws at the deadline.
    private func fill(before deadline: ContinuousClock.Instant) throws -> Bool {
        guard pollReady(fd, before: deadline) else { throw TestFailure("no reply before the deadline; partial: \(RESP.show(pending))") }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = recv(fd, &chunk, chunk.count, 0)
        if n < 0 && (errno == ECONNRESET) { return false }
        guard n >= 0 else { throw TestFailure("recv: \(String(cString: strerror(errno)))") }
        pending += chunk[..<n]
        return n > 0
    }
}

/// RESP2 framing for the tests' own reading.
enum RESP {
    /// The length of the complete reply at the start of `bytes`, nil if it is not all there.
    static func replyLength(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard let first = bytes.first, let lineEnd = lineEnd(bytes) else { return nil }
        let header = bytes[(bytes.startIndex + 1)..<lineEnd]
        let afterLine = lineEnd + 2 - bytes.startIndex
        switch first {
        case UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: ":"):
            return afterLine
        case UInt8(ascii: "$"):
            guard let length = Int(String(decoding: header, as: UTF8.self)) else { return nil }
            if length < 0 { return afterLine }
            return bytes.count >= afterLine + length + 2 ? afterLine + length + 2 : nil
        case UInt8(ascii: "*"):
            guard let count = Int(String(decoding: header, as: UTF8.self)) else { return nil }
            var offset = afterLine
            for _ in 0..<max(count, 0) {
                guard let element = replyLength(bytes[(bytes.startIndex + offset)...]) else { return nil }
                offset += element
            }
            return offset
        default:
            return nil
        }
    }

    private static func lineEnd(_ bytes: ArraySlice<UInt8>) -> Int? {
        var index = bytes.startIndex
        while index + 1 < bytes.endIndex {
            if bytes[index] == 13 && bytes[index + 1] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// Bytes as a readable string for messages (CR LF shown as \r\n).
    static func show(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes, as: UTF8.self).replacingOccurrences(of: "\r", with: "\\r").replacingOccurrences(of: "\n", with: "\\n")
    }
}

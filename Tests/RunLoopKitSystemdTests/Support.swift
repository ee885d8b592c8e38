import Foundation
import RunLoopKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A test failure with a message (thrown so a test stops at the first broken expectation).
struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// How long any wait in these tests may take before it counts as a failure. Generous: it
/// bounds a hang, it is never a timing threshold (2 shared cores, debug builds).
let patience: Duration = .seconds(10)

/// Runs `body` on a new thread and returns its result, so blocking calls (poll, waitpid, a
/// running ThreadRunLoop) never occupy a thread of the Swift concurrency pool.
func onNewThread<T: Sendable>(_ name: String = "test-helper", _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.name = name
        thread.start()
    }
}

/// Milliseconds left until `deadline`, for poll(2) (0 when it has passed).
func millisecondsUntil(_ deadline: ContinuousClock.Instant) -> Int32 {
    let left = ContinuousClock.now.duration(to: deadline)
    guard left > .zero else { return 0 }
    let (seconds, attoseconds) = left.components
    return Int32(min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, Int64(Int32.max)))
}

/// Waits until `fd` is readable or `deadline` passes; true when readable.
func waitReadable(_ fd: Int32, before deadline: ContinuousClock.Instant) -> Bool {
    while true {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let n = poll(&entry, 1, millisecondsUntil(deadline))
        if n > 0 { return true }
        if n == 0 { return false }
        if errno != EINTR { return false }
    }
}

/// A datagram AF_UNIX socket bound to a fresh path: what systemd listens on for sd_notify.
final class NotifySocket: Sendable {
    let path: String
    let fd: Int32
    /// Every assignment received so far, in order (for failure messages).
    let received = Locked<[String]>([])
    /// Datagrams read but not yet taken by `nextDatagram`, in order, and one signal each.
    private let queued = Locked<[[String]]>([])
    private let arrivals = DispatchSemaphore(value: 0)
    private let readerDone = DispatchSemaphore(value: 0)

    init() throws {
        // sun_path holds 107 bytes: fall back to /tmp when $TMPDIR is deep.
        let name = "rlk-notify-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let preferred = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        path = preferred.utf8.count < 100 ? preferred : "/tmp/" + name
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestFailure("socket: errno \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw TestFailure("path too long: \(path)") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        guard rc == 0 else { throw TestFailure("bind \(path): errno \(errno)") }
        // Drained as datagrams come, not only while a test waits for one: sd_notify blocks once
        // the socket holds net.unix.max_dgram_qlen (10) unread datagrams, and a daemon's loop
        // blocked there would handle no signal (a test busy elsewhere, or short of CPU in a
        // parallel run, let that happen with a daemon sending STATUS= every 50 ms).
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

    /// The next datagram's assignments, or nil when none arrived before `deadline`.
    func nextDatagram(before deadline: ContinuousClock.Instant) async -> [String]? {
        let (queued, arrivals) = (queued, arrivals)
        let lines: [String]? = await onNewThread("notify-wait") {
            let left = max(0, ContinuousClock.now.duration(to: deadline) / .milliseconds(1))
            guard arrivals.wait(timeout: .now() + .milliseconds(Int(left))) == .success else { return nil }
            return queued.withLock { $0.removeFirst() }
        }
        guard let lines else { return nil }
        received.withLock { $0.append(contentsOf: lines) }
        return lines
    }

    /// Reads datagrams until one holds `assignment` (a whole line such as "READY=1");
    /// returns that datagram's lines. Throws after `patience`.
    @discardableResult
    func waitFor(_ assignment: String) async throws -> [String] {
        let deadline = ContinuousClock.now + patience
        while let lines = await nextDatagram(before: deadline) {
            if lines.contains(assignment) { return lines }
        }
        throw TestFailure("no \(assignment) within \(patience); received: \(received.withLock { $0 })")
    }
}

/// A daemon built beside the tests (example-daemon unless told otherwise), spawned with a chosen
/// environment and its stdout on a socketpair.
final class DaemonProcess: Sendable {
    let pid: pid_t
    private let stdoutFD: Int32
    /// Set (under its lock) before the child is reaped: while it is false, the pid is ours
    /// to signal. A class so closures can share it.
    private final class ExitFlag: Sendable {
        let value = Locked(false)
        func withLock<R>(_ body: (inout Bool) -> R) -> R { value.withLock { body(&$0) } }
    }
    private let exited = ExitFlag()
    let output = Locked<[String]>([])
    private let pending = Locked<[UInt8]>([])

    /// `executable` next to the test bundle: the build directory (`.build/<triple>/<config>`)
    /// holds both. Walks up a few levels in case the runner lives in a subdirectory.
    static func executablePath(_ executable: String = "example-daemon") throws -> String {
        var directory = URL(fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            .deletingLastPathComponent()
        for _ in 0..<4 {
            let candidate = directory.appendingPathComponent(executable).path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
            directory.deleteLastPathComponent()
        }
        throw TestFailure("\(executable) not found near \(CommandLine.arguments[0]); build with --build-tests")
    }

    /// Starts the daemon with the test's environment minus the systemd variables, plus
    /// `environment`. Signals are reset to their defaults and unblocked in the child. With a
    /// `listeningSocket`, the daemon is socket-activated as systemd would do it: the socket at
    /// descriptor 3, LISTEN_FDS=1, LISTEN_FDNAMES=`activationName`, LISTEN_PID the daemon's pid
    /// (set by a shell that then execs the daemon, keeping its pid).
    init(executable: String = "example-daemon", environment: [String: String], arguments: [String] = [],
         listeningSocket: Int32? = nil, activationName: String = "example-daemon") throws {
        let daemon = try Self.executablePath(executable)
        let path = listeningSocket == nil ? daemon : "/bin/sh"
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw TestFailure("socketpair: errno \(errno)")
        }
        defer { close(pair[1]) }
        stdoutFD = pair[0]

        var env = ProcessInfo.processInfo.environment
        for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] { env[key] = nil }
        env.merge(environment) { _, new in new }
        var argStrings = [path] + arguments
        if listeningSocket != nil {
            env["LISTEN_FDS"] = "1"
            env["LISTEN_FDNAMES"] = activationName
            argStrings = [path, "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\"", daemon] + arguments
        }
        let envStrings = env.map { "\($0.key)=\($0.value)" }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // stderr too: a daemon must not hold the test runner's own output open (if the runner
        // died, `swift test` would wait for that output to end for ever).
        posix_spawn_file_actions_adddup2(&actions, pair[1], STDOUT_FILENO)
        posix_spawn_file_actions_adddup2(&actions, pair[1], STDERR_FILENO)
        // Through a spare number, so that dup2 never maps a descriptor onto itself (which
        // would leave it close-on-exec).
        let spare = listeningSocket.map { fcntl($0, F_DUPFD_CLOEXEC, 10) } ?? -1
        defer { if spare >= 0 { close(spare) } }
        if spare >= 0 { posix_spawn_file_actions_adddup2(&actions, spare, 3) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGUSR2, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        var child: pid_t = 0
        let rc = withCStrings(argStrings) { argv in
            withCStrings(envStrings) { envp in
                posix_spawn(&child, path, &actions, &attributes, argv, envp)
            }
        }
        guard rc == 0 else {
            close(pair[0])
            throw TestFailure("posix_spawn \(path): \(String(cString: strerror(rc)))")
        }
        pid = child
    }

    deinit {
        // A test that failed half-way must not leave a daemon behind.
        let running = exited.withLock { done in
            if !done { kill(pid, SIGKILL) }
            return !done
        }
        if running { waitpid(pid, nil, 0) }
        close(stdoutFD)
    }

    func send(_ signal: Int32) {
        exited.withLock { done in
            if !done { kill(pid, signal) }
        }
    }

    /// Reads stdout until a line equal to (or starting with) `prefix`; throws after `patience`.
    @discardableResult
    func waitForLine(startingWith prefix: String) async throws -> String {
        let deadline = ContinuousClock.now + patience
        while true {
            if let line = takeLine(startingWith: prefix) { return line }
            let fd = stdoutFD
            let chunk: [UInt8]? = await onNewThread("stdout-reader") {
                guard waitReadable(fd, before: deadline) else { return nil }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = read(fd, &buffer, buffer.count)
                return n > 0 ? Array(buffer[..<n]) : nil
            }
            guard let chunk else {
                throw TestFailure("no stdout line '\(prefix)…' within \(patience) (or EOF); got \(output.withLock { $0 })")
            }
            pending.withLock { $0.append(contentsOf: chunk) }
        }
    }

    private func takeLine(startingWith prefix: String) -> String? {
        while let line = pending.withLock({ buffer -> String? in
            guard let newline = buffer.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
            defer { buffer.removeSubrange(...newline) }
            return String(decoding: buffer[..<newline], as: UTF8.self)
        }) {
            output.withLock { $0.append(line) }
            if line.hasPrefix(prefix) { return line }
        }
        return nil
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

    /// Waits for the child to exit; kills it (and reports `.timedOut`) after `patience`.
    func waitForExit() async -> Exit {
        let pid = pid
        let timedOut = Atomic(false)
        let killer = Task { [exited] in
            try? await Task.sleep(for: patience)
            guard !Task.isCancelled else { return }
            exited.withLock { done in
                if !done { timedOut.store(true, ordering: .relaxed); kill(pid, SIGKILL) }
            }
        }
        let status: Int32 = await onNewThread("waitpid") { [exited] in
            var info = siginfo_t()
            // Wait without reaping, so the pid cannot be reused while `killer` may still signal it.
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR {}
            exited.withLock { $0 = true }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            return status
        }
        killer.cancel()
        if timedOut.load(ordering: .relaxed) { return .timedOut }
        // WIFEXITED/WEXITSTATUS/WTERMSIG are macros Swift does not import.
        if status & 0x7f == 0 { return .exited((status >> 8) & 0xff) }
        return .signalled(status & 0x7f)
    }
}

/// Calls `body` with a NULL-terminated `char *[]` of copies of `strings`.
func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { pointers.forEach { free($0) } }
    return body(pointers)
}

/// example-client (next to example-daemon) running with some arguments, started on the calling thread (so it runs even while the
/// concurrency pool is busy).
struct ExampleClientProcess: @unchecked Sendable {
    let process = Process()
    let output = Pipe()

    init(_ arguments: [String]) throws {
        let path = (try DaemonProcess.executablePath() as NSString).deletingLastPathComponent + "/example-client"
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = output
        process.standardError = output
        try process.run()
    }

    /// Waits for the exit (on threads of its own); kills the client after `timeout`.
    func finish(timeout: Duration = patience) async -> (DaemonProcess.Exit, String) {
        let pid = process.processIdentifier
        let killer = Task {
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { kill(pid, SIGKILL) }
        }
        let output = output, process = process
        let text: String = await onNewThread("client-reader") {
            String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        }
        await onNewThread("client-wait") { process.waitUntilExit() }
        killer.cancel()
        let exit: DaemonProcess.Exit = process.terminationReason == .exit
            ? .exited(process.terminationStatus) : .signalled(process.terminationStatus)
        return (exit, text)
    }
}

/// A configuration file for the daemon with a unique name; removed by the caller.
func daemonConfiguration(_ lines: String = "") throws -> (path: String, name: String) {
    let name = "rlk-daemon-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
    let path = FileManager.default.temporaryDirectory.appendingPathComponent(name + ".conf").path
    try "name = \(name)\n\(lines)".write(toFile: path, atomically: true, encoding: .utf8)
    return (path, name)
}

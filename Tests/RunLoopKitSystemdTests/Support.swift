import Foundation
import PackageTestSupport
import RunLoopKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// How long any wait in these tests may take before it counts as a failure. Generous: it
/// bounds a hang, it is never a timing threshold (2 shared cores, debug builds).
let patience: Duration = .seconds(10)

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

    /// Starts the daemon with the test's environment minus the systemd variables, plus
    /// `environment`. Signals are reset to their defaults and unblocked in the child. With a
    /// `listeningSocket`, the daemon is socket-activated as systemd would do it: the socket at
    /// descriptor 3, LISTEN_FDS=1, LISTEN_FDNAMES=`activationName`, LISTEN_PID the daemon's pid
    /// (set by a shell that then execs the daemon, keeping its pid).
    init(executable: String = "example-daemon", environment: [String: String], arguments: [String] = [],
         listeningSocket: Int32? = nil, activationName: String = "example-daemon") throws {
        (pid, stdoutFD) = try spawnDaemon(try builtExecutable(executable), arguments, environment: environment,
                                          listeningSocket: listeningSocket, activationName: activationName)
    }

    /// Socket-activated with several sockets, at descriptors 3, 4, … with their names.
    init(executable: String = "example-daemon", environment: [String: String], arguments: [String] = [],
         listeningSockets: [(descriptor: Int32, name: String)]) throws {
        (pid, stdoutFD) = try spawnDaemon(try builtExecutable(executable), arguments, environment: environment,
                                          listeningSockets: listeningSockets)
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
                guard pollReady(fd, before: deadline) else { return nil }
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

/// example-client (next to example-daemon) running with some arguments, started on the calling thread (so it runs even while the
/// concurrency pool is busy).
struct ExampleClientProcess: @unchecked Sendable {
    let process = Process()
    /// The client's stdout and stderr (`closeOnExecStream`: no other test's child inherits it).
    let output: FileHandle

    init(_ arguments: [String]) throws {
        let path = try builtExecutable("example-client")
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let (ours, childEnd) = try closeOnExecStream()
        output = ours
        process.standardOutput = childEnd
        process.standardError = childEnd
        defer { try? childEnd.close() }
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
            String(decoding: output.readDataToEndOfFile(), as: UTF8.self)
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

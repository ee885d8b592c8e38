#if ServiceLifecycle
// A ServiceHost child process whose output the test reads as it comes, so it can signal the
// child at a chosen point (after "ready") and then collect the rest. Every wait has a deadline
// of seconds, only as a hang guard: a child that misbehaves is killed and the test fails.

import Glibc
import PackageTestSupport

/// ServiceHost, built beside this test binary (a dependency of the test target).
let serviceHost = executableBesideTests("ServiceHost")

/// How a child ended.
enum Termination: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)
    /// Still running at the hang guard; it was killed.
    case hung

    var description: String {
        switch self {
        case .exited(let code): "exit \(code)"
        case .signalled(let signal): "signal \(signal)"
        case .hung: "hung (killed at the hang guard)"
        }
    }
}

final class HostProcess {
    let pid: pid_t
    private let output: Int32
    private var pending: [UInt8] = []
    /// Every line read so far (stdout and stderr share the socket).
    private(set) var lines: [String] = []
    private var ended = false

    /// Starts ServiceHost with `arguments`, its stdout and stderr on one socket. Nil if it could
    /// not be spawned.
    init?(_ arguments: [String]) {
        // Not a pipe: see closeOnExecSocketPair.
        guard let fds = try? closeOnExecSocketPair() else { return nil }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, fds[1], 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([serviceHost] + arguments).map { strdup($0) } + [nil]
        // A precondition failure then ends the child by its trap signal (under ThreadSanitizer
        // too), without the runtime's backtracer suspending threads first.
        var environment: [UnsafeMutablePointer<CChar>?] = [strdup("SWIFT_BACKTRACE=enable=no")]
        var entry = environ
        while let variable = entry.pointee {
            if !String(cString: variable).hasPrefix("SWIFT_BACKTRACE=") { environment.append(strdup(variable)) }
            entry += 1
        }
        environment.append(nil)
        defer {
            argv.forEach { free($0) }
            environment.forEach { free($0) }
        }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, serviceHost, &actions, nil, argv, environment)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            return nil
        }
        self.pid = pid
        output = fds[0]
    }

    deinit {
        if !ended {
            kill(pid, SIGKILL)   // our own child, by its pid
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        }
        close(output)
    }

    /// Reads until a line equal to `line` arrives; false at end of output or after `limit`.
    func waitForLine(_ line: String, limit: Duration = .seconds(60)) -> Bool {
        let deadline = ContinuousClock.now + limit
        var seen = lines.count
        while true {
            if lines[seen...].contains(line) { return true }
            seen = lines.count
            guard readSome(until: deadline) else { return lines[seen...].contains(line) }
        }
    }

    /// Sends `signal` to the child.
    func send(_ signal: Int32) { kill(pid, signal) }

    /// Reads the rest of the output and reaps the child, killing it after `limit`.
    func finish(limit: Duration = .seconds(60)) -> Termination {
        let deadline = ContinuousClock.now + limit
        while readSome(until: deadline) {}
        let hung = ContinuousClock.now >= deadline
        if hung { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        ended = true
        if hung { return .hung }
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signalled(signal)
    }

    /// The value of the last "key: value" line with this key.
    func value(_ key: String) -> String? {
        lines.last { $0.hasPrefix(key + ": ") }.map { String($0.dropFirst(key.count + 2)) }
    }

    /// Everything read, for failure messages.
    var transcript: String { lines.joined(separator: "\n") }

    /// Reads what is available (waiting until `deadline`); false at end of output or deadline.
    private func readSome(until deadline: ContinuousClock.Instant) -> Bool {
        let remaining = deadline - ContinuousClock.now
        guard remaining > .zero else { return false }
        var poller = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(min(remaining.components.seconds * 1000 + 1, 60_000))
        let ready = poll(&poller, 1, milliseconds)
        if ready < 0 { return errno == EINTR }
        if ready == 0 { return ContinuousClock.now < deadline }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { read(output, $0.baseAddress, $0.count) }
        if count < 0 { return errno == EINTR }
        if count == 0 {
            if !pending.isEmpty { lines.append(String(decoding: pending, as: UTF8.self)) }
            pending = []
            return false
        }
        pending += buffer[0..<count]
        while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
            lines.append(String(decoding: pending[..<newline], as: UTF8.self))
            pending.removeSubrange(...newline)
        }
        return true
    }
}
#endif

// The other process of these tests: the DistributedPeer executable (Tests/DistributedPeer),
// spawned with posix_spawn, its stdout and stderr in a temporary file.
//
// Conventions (as in the other test targets): real processes and sockets, no mocks; every
// wait has a deadline of seconds as a hang guard, nothing asserts on durations; names carry
// this process's pid and a serial, so tests running in parallel never meet.

import Glibc
import PackageTestSupport
import Synchronization
import Testing

/// Hang guard for anything a correct implementation does promptly.
let waitLimit: Duration = .seconds(60)

/// A fresh name prefix for one test.
func uniquePrefix(_ test: String) -> String {
    "rlkd-\(test)-\(getpid())-\(nameSerial.wrappingAdd(1, ordering: .relaxed).newValue)"
}
private let nameSerial = Atomic<Int>(0)

struct SpawnError: Error, CustomStringConvertible {
    var description: String
}

/// A running DistributedPeer. Killed and reaped on deinit if it is still running.
final class PeerProcess: @unchecked Sendable {
    let pid: pid_t
    private let outputPath: String
    private var reaped: Int32?

    /// Spawns `DistributedPeer arguments…`, or another executable built beside the tests.
    init(_ arguments: [String], executable: String = PeerProcess.executable) throws {
        outputPath = "/tmp/rlkd-peer-\(getpid())-\(nameSerial.wrappingAdd(1, ordering: .relaxed).newValue).out"
        let output = open(outputPath, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw SpawnError(description: "cannot create \(outputPath)") }
        defer { close(output) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)
        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        guard result == 0 else { throw SpawnError(description: "posix_spawn \(executable): \(String(cString: strerror(result)))") }
        self.pid = pid
    }

    /// `DistributedPeer serve PREFIX [UID]`, once it said it is ready.
    static func serving(_ prefix: String, onlyUID: UInt32? = nil) async throws -> PeerProcess {
        let peer = try PeerProcess(["serve", prefix] + (onlyUID.map { [String($0)] } ?? []))
        guard await peer.waitForOutput("ready \(peer.pid)\n") else {
            throw SpawnError(description: "DistributedPeer serve did not get ready: \(peer.output)")
        }
        return peer
    }

    deinit {
        if reaped == nil {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        unlink(outputPath)
    }

    /// Waits for the exit (at most `timeout`): the exit status, 128 + the signal, or nil.
    func exitStatus(timeout: Duration = waitLimit) async -> Int32? {
        if let reaped { return reaped }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            var status: Int32 = 0
            if waitpid(pid, &status, WNOHANG) == pid {
                reaped = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
                return reaped
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    /// Everything the peer wrote so far.
    var output: String {
        readText(outputPath) ?? ""
    }

    /// Waits until the output contains `text`, at most `timeout`.
    /// (Polled: the suspended task holds no thread meanwhile.)
    func waitForOutput(_ text: String, timeout: Duration = waitLimit) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if output.contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return output.contains(text)
    }

    /// The DistributedPeer executable, built beside the test binary.
    static let executable = executableBesideTests("DistributedPeer")
}

/// The error `body` throws, or nil when it returns.
func thrownError<T>(_ body: () async throws -> T) async -> (any Error)? {
    do {
        _ = try await body()
        return nil
    } catch {
        return error
    }
}

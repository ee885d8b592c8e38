// Shared helpers for the cross-process transport tests.
//
// Conventions (as in RunLoopKitTests):
// - Real processes, real sockets, no mocks. Children are the `PortPeer` (Swift, RunLoopKit
//   public API) and `PortPeerC` (independent C implementation of the spec) executables.
// - Every wait has a deadline of seconds; nothing asserts on durations.
// - Descriptors reach a child only through posix_spawn_file_actions_adddup2: everything the
//   tests and RunLoopKit create is close-on-exec, so tests running in parallel never leak
//   send rights into each other's children.

// CRunLoopKit's header includes the socket headers too; in a compile of several files where
// one imports it, the socket constants belong to it, and a file that does not import it cannot
// see them.
import CRunLoopKit
import Glibc
import FoundationEssentials
import Synchronization
import Testing
@testable import RunLoopKit

/// Hang guard for anything a correct implementation does promptly: generous, because the work a
/// test waits for may queue behind the rest of the suite on the cooperative pool.
let waitLimit: Duration = .seconds(60)

/// Runs `body`, which blocks for long (a child process's whole run), on a resident thread of
/// its own and awaits its result. A synchronous test holds one of the cooperative pool's
/// threads (two on the CI machine) for as long as it runs; one that waits a minute or more
/// for a child leaves every async test of the suite, the gRPC bridge's streams among them, one
/// thread to share, and work they wait for then queues past their deadlines.
func offThePool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    let thread = ResidentThread(name: "off the pool")
    defer { thread.stop() }
    return await withCheckedContinuation { continuation in
        do {
            try thread.perform { continuation.resume(returning: body()) }
        } catch {
            preconditionFailure("a resident thread made a moment ago is already finished")
        }
    }
}

// MARK: - Thread-safe state shared with loop threads

final class Shared<T: Sendable>: Sendable {
    private let storage: Locked<T>
    init(_ value: T) { storage = Locked(value) }
    var value: T {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    func update<R>(_ change: (inout T) -> R) -> R { storage.withLock { change(&$0) } }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
@discardableResult
func waitUntil(timeout: Duration = waitLimit, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        usleep(1_000)
    }
}

/// A local port received on its own resident thread, recording messages and transport errors.
/// The recorded messages keep their port components alive; `clear()` lets them go.
final class ReceivingPort: Sendable {
    let port: MessagePort
    let thread: ResidentThread
    let messages = Shared<[MessagePort.Message]>([])
    let errors = Shared<[PortError]>([])
    /// The same reports with who sent what was refused.
    let reports = Shared<[MessagePort.TransportReport]>([])

    init(name: String, queueLimit: Int = 1024, keepMessages: Bool = true,
         reply: (@Sendable (MessagePort.Message) -> Void)? = nil) throws {
        port = try MessagePort(queueLimit: queueLimit)
        thread = ResidentThread(name: name)
        let messages = self.messages
        port.setHandler { message in
            reply?(message)
            if keepMessages {
                messages.update { $0.append(message) }
            } else {
                // Keep only the envelope, so received proxies close at once.
                messages.update { $0.append(MessagePort.Message(msgid: message.msgid)) }
            }
        }
        let errors = self.errors, reports = self.reports
        port.setTransportReportHandler { report in
            reports.update { $0.append(report) }
            errors.update { $0.append(report.error) }
        }
        thread.runLoop.add(port, forMode: .default)
    }

    var msgids: [UInt32] { messages.value.map(\.msgid) }

    func waitForMessages(_ count: Int, timeout: Duration = waitLimit) -> [MessagePort.Message]? {
        waitUntil(timeout: timeout) { messages.value.count >= count } ? messages.value : nil
    }

    func waitForError(timeout: Duration = waitLimit) -> PortError? {
        waitUntil(timeout: timeout) { !errors.value.isEmpty } ? errors.value.first : nil
    }

    func waitForReport(timeout: Duration = waitLimit) -> MessagePort.TransportReport? {
        waitUntil(timeout: timeout) { !reports.value.isEmpty } ? reports.value.first : nil
    }

    /// Runs `body` on the receiving loop's thread and waits for it (kernel fault injections
    /// hold for the thread that makes the call: the loop's reads and accepts).
    func onLoopThread(_ body: @escaping @Sendable () -> Void) throws {
        try thread.perform(waitUntilDone: true, body)
    }

    func clear() { messages.value = [] }

    func stop() {
        port.invalidate()
        thread.stop()
    }
}

extension MessagePort.Message {
    var text: String? { data.map { String(decoding: $0, as: UTF8.self) } }
}

// MARK: - Peer executables and child processes

/// The folder of the build products (`.build/<config>` or its triple-named equivalent): the
/// nearest ancestor of the test executable that holds `PortPeer`.
let productsFolder: String = {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    precondition(count > 0, "readlink /proc/self/exe failed")
    var folder = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    while folder != "/" && !folder.isEmpty {
        folder = parentFolder(folder)
        if access(folder + "/PortPeer", X_OK) == 0 && access(folder + "/PortPeerC", X_OK) == 0 { return folder }
    }
    preconditionFailure("PortPeer and PortPeerC not found above the test executable; build with --build-tests")
}()

func parentFolder(_ path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}

var portPeer: String { productsFolder + "/PortPeer" }
var portPeerC: String { productsFolder + "/PortPeerC" }

/// The folder of the protocol's test vectors, found from this source file.
let vectorsFolder: String = parentFolder(parentFolder(parentFolder(#filePath))) + "/Protocols/vectors"

enum ChildExit: Equatable, CustomStringConvertible {
    case exited(Int32)
    case signalled(Int32)
    var description: String {
        switch self {
        case .exited(let code): "exited with status \(code)"
        case .signalled(let signal): "killed by signal \(signal)"
        }
    }
}

struct SpawnError: Error, CustomStringConvertible {
    var description: String
}

/// A child process started with posix_spawn. Its stdout and stderr go to a temporary file
/// (read with `output`). Killed and reaped on deinit if still running.
final class ChildProcess: @unchecked Sendable {
    let pid: pid_t
    private let outputPath: String
    private let reaped = Locked<ChildExit?>(nil)
    private static let serial = Atomic<Int>(0)

    /// `inherit` maps descriptors of the test process to the numbers the child gets them at;
    /// `environment` entries (`NAME=value`) are added to the test process's own.
    init(_ executable: String, _ arguments: [String], inherit: [(from: Int32, to: Int32)] = [],
         environment: [String] = []) throws {
        let serial = Self.serial.wrappingAdd(1, ordering: .relaxed).newValue
        outputPath = "/tmp/rlk-transport-\(getpid())-\(serial).out"
        let output = open(outputPath, O_CREAT | O_TRUNC | O_RDWR | O_CLOEXEC, 0o600)
        guard output >= 0 else { throw SpawnError(description: "cannot create \(outputPath)") }
        defer { close(output) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var temporaries: [Int32] = []
        defer { for descriptor in temporaries { close(descriptor) } }
        // Sources that collide with a target number are moved out of the way first, so that
        // every dup2 is between different numbers (dup2(fd, fd) keeps close-on-exec).
        let targets = Set(inherit.map(\.to) + [1, 2])
        for (from, to) in inherit {
            var source = from
            if targets.contains(source) {
                source = fcntl(from, F_DUPFD_CLOEXEC, 100)
                guard source >= 0 else { throw SpawnError(description: "F_DUPFD_CLOEXEC failed") }
                temporaries.append(source)
            }
            posix_spawn_file_actions_adddup2(&actions, source, to)
        }
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, output, 2)

        let argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = []
        var entry = environ
        while let variable = entry.pointee {
            envp.append(strdup(variable))
            entry += 1
        }
        envp += environment.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard result == 0 else {
            throw SpawnError(description: "posix_spawn \(executable): \(String(cString: strerror(result)))")
        }
        self.pid = pid
    }

    deinit {
        if reaped.withLock({ $0 }) == nil {
            Glibc.kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        unlink(outputPath)
    }

    /// Waits for the child to exit, at most `timeout`; nil if it is still running.
    func wait(timeout: Duration = waitLimit) -> ChildExit? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let done = reaped.withLock({ $0 }) { return done }
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid {
                let exit: ChildExit = (status & 0x7f) == 0 ? .exited((status >> 8) & 0xff) : .signalled(status & 0x7f)
                reaped.withLock { $0 = exit }
                return exit
            }
            if ContinuousClock.now >= deadline { return nil }
            usleep(2_000)
        }
    }

    /// Waits for the exit; on timeout kills the child and reports nil.
    func finish(timeout: Duration = waitLimit) -> ChildExit? {
        if let exit = wait(timeout: timeout) { return exit }
        kill(SIGKILL)
        _ = wait(timeout: waitLimit)
        return nil
    }

    func kill(_ signal: Int32) { _ = Glibc.kill(pid, signal) }

    /// Everything the child wrote to stdout and stderr so far.
    var output: String {
        guard let file = fopen(outputPath, "r") else { return "" }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Waits until the output contains `text`, at most `timeout`.
    func waitForOutput(_ text: String, timeout: Duration = waitLimit) -> Bool {
        waitUntil(timeout: timeout) { output.contains(text) }
    }
}

// MARK: - Descriptors

/// A pipe, both ends close-on-exec (pipe2 is not imported; the window before fcntl can only
/// leak an end into a child spawned at that moment, which holds no port).
func closeOnExecPipe() -> (read: Int32, write: Int32) {
    var ends: [Int32] = [-1, -1]
    precondition(pipe(&ends) == 0, "pipe: \(String(cString: strerror(errno)))")
    for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
    return (ends[0], ends[1])
}

/// A raw AF_UNIX SOCK_SEQPACKET socketpair, both ends close-on-exec (blocking).
func rawSeqPacketPair() -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    let result = socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds)
    precondition(result == 0, "socketpair: \(String(cString: strerror(errno)))")
    return (fds[0], fds[1])
}

/// What descriptor `fd` of this process refers to (readlink of /proc/self/fd/N: a pidfd reads
/// "pidfd:[inode]", an inode of its own per process), or nil when it is not open.
func fdTarget(_ fd: Int32) -> String? {
    var buffer = [CChar](repeating: 0, count: 256)
    let count = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
    return count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
}

/// The number of open descriptors of this process (entries of /proc/self/fd).
func openDescriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { count += 1 }
    }
    return count - 1  // the directory's own descriptor
}

/// Sends one raw record (any bytes, any descriptors) on a send right, as a hostile or broken
/// peer would. Throws the errno.
func sendRaw(_ bytes: [UInt8], descriptors: [Int32] = [], on sendRight: Int32) throws(Errno) {
    let socket = try SeqPacketSocket(adopting: FileDescriptor(rawValue: sendRight))
    try socket.send(bytes, descriptors: descriptors)
}

/// Waits until the peer of a send right has closed its end (POLLHUP), at most `timeout`.
func waitForHangUp(_ sendRight: Int32, timeout: Duration = waitLimit) -> Bool {
    var entry = pollfd(fd: sendRight, events: Int16(POLLOUT), revents: 0)
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        entry.revents = 0
        if poll(&entry, 1, 100) > 0 && entry.revents & Int16(POLLHUP) != 0 { return true }
    }
    return false
}

/// Encodes a frame with the codec under test.
func frame(msgid: UInt32, _ components: [PortFrame.Component] = [], reply: Bool = false) -> [UInt8] {
    try! PortFrame(msgid: msgid, components: components, hasReplyPort: reply).encode()
}

/// The scale of the fuzz test: ~5,000 frames under ThreadSanitizer.
var underSanitizer: Bool { getenv("RUNLOOPKIT_SANITIZER") != nil }

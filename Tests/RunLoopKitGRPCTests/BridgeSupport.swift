#if GRPC
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import PackageTestSupport
import RunLoopKit
import RunLoopKitGRPC
import Synchronization

// Shared by the bridge tests. Deadlines of seconds are hang guards only.

extension BridgeKeepalive {
    /// The liveness tests' client pings: every 3 s, acknowledged within 2.5 s, margins wide enough
    /// for a live server on two cores loaded by every other suite at once (1.5 s was exceeded
    /// once in CI).
    static let testClient = BridgeKeepalive(interval: .seconds(3), timeout: .milliseconds(2_500))
    /// A server that accepts those pings and pings its clients only after a minute of quiet, so
    /// its own pings play no part in a test (GRPCPortPeer's, too).
    static let tolerantServer = BridgeKeepalive(interval: .seconds(60), timeout: .seconds(20),
                                                minimumClientInterval: .milliseconds(100))
    /// A server that pings a quiet client after 3 s and closes a connection silent for 5.5 s.
    static let watchingServer = BridgeKeepalive(interval: .seconds(3), timeout: .milliseconds(2_500))
}

/// Connects to 127.0.0.1:`port` and says nothing, reading and discarding what the server sends;
/// true once the server closes the connection (end of stream or reset) within `limit`.
/// Blocking: run it off the cooperative pool.
func silentConnectionIsClosed(port: Int, within limit: Duration) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { return false }
    let deadline = ContinuousClock.now + limit
    var buffer = [UInt8](repeating: 0, count: 4096)
    while ContinuousClock.now < deadline {
        guard pollReady(descriptor, before: deadline) else { continue }
        let count = read(descriptor, &buffer, buffer.count)
        if count == 0 || (count < 0 && errno == ECONNRESET) { return true }
    }
    return false
}

/// A plaintext loopback server exporting `port` as `name`, running until `stop()`.
final class LoopbackServer: Sendable {
    let server: PortBridgeServer
    let task: Task<Void, any Error>
    let port: Int

    init(exporting local: MessagePort, as name: String, security: BridgeSecurity = .plaintext(),
         access: RemoteAccess = .anyone, keepalive: BridgeKeepalive? = nil) async throws {
        server = try PortBridgeServer(host: "127.0.0.1", port: 0, security: security, keepalive: keepalive)
        try server.exporter.export(local, as: name, access: access)
        let server = server
        task = Task { try await server.run() }
        port = try await server.listeningPort
    }

    func stop() async {
        server.shutDown()
        task.cancel()
        _ = try? await task.value
    }
}

/// A client of the bridge at 127.0.0.1:`port`, running until `stop()`.
final class LoopbackClient: Sendable {
    let client: PortBridgeClient
    let task: Task<Void, any Error>

    init(port: Int, security: BridgeSecurity = .plaintext(), queueLimit: Int = 64,
         keepalive: BridgeKeepalive? = nil) throws {
        client = try PortBridgeClient(host: "127.0.0.1", port: port, security: security, defaultQueueLimit: queueLimit,
                                      keepalive: keepalive)
        let client = client
        task = Task { try await client.run() }
    }

    func stop() async {
        client.shutDown()
        task.cancel()
        _ = try? await task.value
    }
}

/// A local port on a resident thread of its own, collecting what it receives.
final class Receiver: Sendable {
    let thread: ResidentThread
    let port: MessagePort
    private let received = MessageLog()

    init(name: String, queueLimit: Int = 1024, reply: Bool = true) throws {
        thread = ResidentThread(name: name)
        port = try MessagePort(queueLimit: queueLimit)
        port.setHandler { [received] message in
            received.messages.withLock { $0.append(message) }
            if reply {
                try? message.replyPort?.send(msgid: message.msgid + 1, components: message.components, timeout: .seconds(10))
            }
        }
        thread.runLoop.add(port, forMode: .default)
    }

    var messages: [MessagePort.Message] { received.messages.withLock { $0 } }

    deinit {
        port.invalidate()
        thread.stop()
    }
}

final class MessageLog: Sendable {
    let messages = Mutex<[MessagePort.Message]>([])
}

/// Runs `body` on a resident thread of its own (for the synchronous, loop-running calls) and
/// returns its result.
func onThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () -> T) async -> T {
    let thread = ResidentThread(name: name)
    defer { thread.stop() }
    return await withCheckedContinuation { continuation in
        do {
            try thread.perform { continuation.resume(returning: body()) }
        } catch {
            preconditionFailure("a new resident thread is finished")
        }
    }
}

/// Sends `payload` to `port` from a new thread, each send waiting up to `timeout` for room,
/// until one fails; returns that failure (a sender left blocked on a full stream).
func sendUntilFailure(_ port: MessagePort, msgid: UInt32, payload: Data, timeout: Duration) async -> PortError {
    await onThread("blocked sender") { () -> PortError in
        while true {
            do throws(PortError) {
                try port.send(msgid: msgid, components: [.data(payload)], timeout: timeout)
            } catch {
                return error
            }
        }
    }
}

func bytes(_ text: String) -> Data { Data(text.utf8) }

/// The synchronous `sendRequest`, on a resident thread of its own whose loop it runs.
func requestOnThread(_ proxy: MessagePort, msgid: UInt32, components: [MessagePort.Message.Component] = [],
                     timeout: Duration) async -> Result<MessagePort.Message, PortError> {
    await onThread("requester") {
        do throws(PortError) {
            return .success(try proxy.sendRequest(msgid: msgid, components: components, timeout: timeout,
                                                  replyMode: "bridge-test.reply"))
        } catch {
            return .failure(error)
        }
    }
}

/// Open descriptors of this process, counted from /proc/self/fd.
func openDescriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count
}

// MARK: - Child processes

/// A GRPCPortPeer child: its stdin and stdout are sockets; killed and reaped on deinit.
final class PeerProcess: @unchecked Sendable {
    let pid: pid_t
    let input: Int32
    let output: Int32
    let listeningPort: Int

    init(name: String, mode: String) throws {
        let executable = try builtExecutable("GRPCPortPeer")
        // Not pipes: see closeOnExecSocketPair.
        let stdinPipe = try closeOnExecSocketPair()
        let stdoutPipe = try closeOnExecSocketPair()
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdinPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, stdoutPipe[1], 1)
        let argv: [UnsafeMutablePointer<CChar>?] = [executable, name, mode].map { (argument: String) in strdup(argument) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(stdinPipe[0])
        close(stdoutPipe[1])
        guard result == 0 else { throw PeerError("posix_spawn: \(result)") }
        self.pid = pid
        input = stdinPipe[1]
        output = stdoutPipe[0]
        // "listening PORT\n", within a hang guard: a peer that dies first ends the stream.
        let deadline = ContinuousClock.now + .seconds(30)
        var line: [UInt8] = []
        var byte: UInt8 = 0
        while pollReady(output, before: deadline), read(output, &byte, 1) == 1, byte != UInt8(ascii: "\n") { line.append(byte) }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("listening "), let port = Int(text.dropFirst(10)) else {
            Glibc.kill(pid, SIGKILL)
            throw PeerError("GRPCPortPeer did not start: '\(text)'")
        }
        listeningPort = port
    }

    func kill() { Glibc.kill(pid, SIGKILL) }

    /// Stops the process (SIGSTOP) and returns once it has stopped (signals are delivered
    /// asynchronously): it holds its sockets open and answers nothing, as a hung or
    /// partitioned server does.
    func suspendProcess() {
        Glibc.kill(pid, SIGSTOP)
        var status: Int32 = 0
        // WIFSTOPPED: the low byte is 0x7f. Nothing else can be reported: it neither exits nor
        // continues until the test says so.
        while waitpid(pid, &status, WUNTRACED) == -1 && errno == EINTR {}
        precondition(status & 0xff == 0x7f, "GRPCPortPeer did not stop (wait status \(status))")
    }

    /// Lets a stopped process run again (SIGCONT).
    func continueProcess() { Glibc.kill(pid, SIGCONT) }

    func resume() {
        var newline = UInt8(ascii: "\n")
        _ = write(input, &newline, 1)
    }

    deinit {
        Glibc.kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
        close(input)
        close(output)
    }
}

struct PeerError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

// MARK: - Waiting

/// A one-shot event a test can await (an invalidation handler that ran, say).
final class Latch: Sendable {
    private struct State {
        var raised = false
        var waiters: [CheckedContinuation<Void, Never>] = []
    }
    private let state = Mutex(State())

    /// Raises the latch, resuming every waiter; later calls do nothing. Any thread.
    func raise() {
        let waiters: [CheckedContinuation<Void, Never>] = state.withLock { state in
            guard !state.raised else { return [] }
            state.raised = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    var isRaised: Bool { state.withLock { $0.raised } }

    /// Returns once the latch is raised.
    func wait() async {
        await withCheckedContinuation { continuation in
            let raised: Bool = state.withLock { state in
                if !state.raised { state.waiters.append(continuation) }
                return state.raised
            }
            if raised { continuation.resume() }
        }
    }
}

/// `body`'s result, or nil if it has none after `limit`: a hang guard, so that a test whose
/// awaited outcome never comes fails in seconds rather than at its time limit. `body` keeps
/// running (in a task of its own) when the guard gives up.
func within<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async -> T) async -> T? {
    let decided = Mutex(false)
    let timer = Mutex<Task<Void, Never>?>(nil)
    let result: T? = await withCheckedContinuation { continuation in
        let finish: @Sendable (T?) -> Void = { value in
            let first = decided.withLock { decided in
                defer { decided = true }
                return !decided
            }
            if first { continuation.resume(returning: value) }
        }
        timer.withLock { $0 = Task { if (try? await Task.sleep(for: limit)) != nil { finish(nil) } } }
        Task { finish(await body()) }
    }
    timer.withLock { $0?.cancel() }
    return result
}

/// Returns once `condition` holds, checking every 10 ms; throws after `limit` (a hang guard).
func waitUntil(_ what: String, within limit: Duration = .seconds(10),
               _ condition: @escaping @Sendable () -> Bool) async throws {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        guard ContinuousClock.now < deadline else { throw PeerError("never happened within \(limit): \(what)") }
        try await Task.sleep(for: .milliseconds(10))
    }
}
#endif

#if Tracing
import Distributed
import Glibc
import FoundationEssentials
import InMemoryTracing
import PackageTestSupport
import RunLoopKit
import RunLoopKitDistributed
import RunLoopKitTracing
import Synchronization
import Testing
import Tracing

enum TestTraceIDKey: ServiceContextKey {
    typealias Value = String
}

/// Injects and extracts one key ("test-trace-id"): what a W3C instrument does with traceparent.
/// TracingPortPeer bootstraps the same one.
struct TestInstrument: Instrument {
    func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract: Extractor, Extract.Carrier == Carrier {
        if let id = extractor.extract(key: "test-trace-id", from: carrier) { context[TestTraceIDKey.self] = id }
    }

    func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        if let id = context[TestTraceIDKey.self] { injector.inject(id, forKey: "test-trace-id", into: &carrier) }
    }
}

/// Records the spans; its own context keys travel beside the test instrument's.
let tracer = InMemoryTracer()

/// Bootstraps the instruments and installs PortTracing, once for the test process.
let tracingInstalled: Bool = {
    InstrumentationSystem.bootstrap(MultiplexInstrument([tracer, TestInstrument()]))
    PortTracing.install()
    return true
}()

/// The test id of the current context, "none" without one.
var currentTraceID: String { ServiceContext.current?[TestTraceIDKey.self] ?? "none" }

/// Runs `body` within a context whose test id is `id`.
func within<R>(_ id: String, _ body: () throws -> R) rethrows -> R {
    var context = ServiceContext.topLevel
    context[TestTraceIDKey.self] = id
    return try ServiceContext.withValue(context, operation: body)
}

func within<R>(_ id: String, _ body: () async throws -> R) async rethrows -> R {
    var context = ServiceContext.topLevel
    context[TestTraceIDKey.self] = id
    return try await ServiceContext.withValue(context, operation: body)
}

final class Recorder<T: Sendable>: Sendable {
    private let items = Mutex<[T]>([])
    func append(_ item: T) { items.withLock { $0.append(item) } }
    var values: [T] { items.withLock { $0 } }

    /// Waits (hang guard only) until `count` items are recorded.
    func wait(for count: Int) -> [T]? {
        let deadline = ContinuousClock.now + .seconds(60)
        while values.count < count {
            if ContinuousClock.now >= deadline { return nil }
            usleep(1_000)
        }
        return values
    }
}

distributed actor Greeter {
    typealias ActorSystem = PortActorSystem

    distributed func traceID() -> String { currentTraceID }
}

@Suite("PortTracing", .timeLimit(.minutes(2)))
struct PortTracingTests {
    init() {
        #expect(tracingInstalled)
    }

    @Test("§3.49 a handler on a resident thread runs within the sender's context; with no context at the send, nothing is added")
    func handlerWithinSendersContext() async throws {
        let thread = ResidentThread(name: "tracing-handler")
        defer { thread.stop() }
        let port = try MessagePort()
        defer { port.invalidate() }
        let seen = Recorder<(UInt32, String, Bool)>()
        port.setHandler { message in seen.append((message.msgid, currentTraceID, PortTracing.context(of: message) != nil)) }
        thread.runLoop.add(port, forMode: .default)

        try within("sync") { try port.send(msgid: 1, timeout: .seconds(30)) }
        try port.send(msgid: 2, timeout: .seconds(30))
        try await within("async") { try await port.send(msgid: 3) }
        let values = try #require(seen.wait(for: 3))
        #expect(values.map(\.0) == [1, 2, 3])
        #expect(values.map(\.1) == ["sync", "none", "async"])
        // The message sent with no context carries nothing.
        #expect(values.map(\.2) == [true, false, true])
    }

    @Test("§3.49 a reply is handled within its request's context (a reply port's handler, and async sendRequest)")
    func replyWithinRequestsContext() async throws {
        let server = ResidentThread(name: "tracing-server")
        defer { server.stop() }
        let service = try MessagePort()
        defer { service.invalidate() }
        service.setHandler { message in
            try? message.replyPort?.send(msgid: message.msgid + 1, components: [.data(Data(currentTraceID.utf8))],
                                         timeout: .seconds(30))
        }
        server.runLoop.add(service, forMode: .default)

        let client = ResidentThread(name: "tracing-client")
        defer { client.stop() }
        let replies = try MessagePort()
        defer { replies.invalidate() }
        let seen = Recorder<(UInt32, String)>()
        replies.setHandler { message in seen.append((message.msgid, currentTraceID)) }
        client.runLoop.add(replies, forMode: .default)
        try within("request-1") { try service.send(msgid: 10, from: replies, timeout: .seconds(30)) }
        let values = try #require(seen.wait(for: 1))
        #expect(values[0] == (11, "request-1"))

        let reply = try await within("request-2") { try await service.sendRequest(msgid: 20, timeout: .seconds(30)) }
        #expect(reply.msgid == 21)
        #expect(reply.data.map { String(decoding: $0, as: UTF8.self) } == "request-2")
        #expect(PortTracing.context(of: reply)?[TestTraceIDKey.self] == "request-2")
    }

    @Test("§3.49 a batch handler runs within its batch's context, and each message's context is at hand")
    func batchHandler() throws {
        let thread = ResidentThread(name: "tracing-batch")
        defer { thread.stop() }
        let port = try MessagePort()
        defer { port.invalidate() }
        let seen = Recorder<(callout: String, message: String)>()
        port.setBatchHandler { batch in
            let callout = currentTraceID
            while let message = batch.next() {
                seen.append((callout, PortTracing.withContext(of: message) { currentTraceID }))
            }
        }
        // Queued before the loop takes the port: one batch.
        try within("batch") {
            for msgid in 0..<3 { try port.send(msgid: UInt32(msgid), timeout: .seconds(30)) }
        }
        thread.runLoop.add(port, forMode: .default)
        let values = try #require(seen.wait(for: 3))
        #expect(values.map(\.callout) == ["batch", "batch", "batch"])
        #expect(values.map(\.message) == ["batch", "batch", "batch"])
    }

    @Test("§3.49 each element of messages() carries its sender's context")
    func messagesElements() async throws {
        let port = try MessagePort()
        defer { port.invalidate() }
        let messages = port.messages()
        try within("element-1") { try port.send(msgid: 1, timeout: .seconds(30)) }
        try port.send(msgid: 2, timeout: .seconds(30))
        var ids: [String] = []
        for await message in messages {
            ids.append(PortTracing.withContext(of: message) { currentTraceID })
            if ids.count == 2 { break }
        }
        #expect(ids == ["element-1", "none"])
    }

    @Test("§3.49 in another process: its handler runs within the sender's context, and the reply within the request's")
    func acrossProcesses() async throws {
        let inbox = try MessagePort()
        defer { inbox.invalidate() }
        let thread = ResidentThread(name: "tracing-inbox")
        defer { thread.stop() }
        let received = Recorder<(MessagePort.Message, String)>()
        inbox.setHandler { message in received.append((message, currentTraceID)) }
        thread.runLoop.add(inbox, forMode: .default)
        let sendRight = try inbox.makeSendRight()
        let child = try spawnDaemon(try builtExecutable("TracingPortPeer"), ["echo"], environment: [:],
                                    listeningSocket: sendRight, activationName: "tracing")
        close(sendRight)
        defer { close(child.output) }
        let hello = try #require(received.wait(for: 1), "no port from TracingPortPeer")[0].0
        let peer = try #require(hello.port(at: 0))

        // A reply port's handler, in this process, within the request's context.
        try within("cross-1") { try peer.send(msgid: 10, from: inbox, timeout: .seconds(30)) }
        let reply = try #require(received.wait(for: 2))[1]
        #expect(reply.0.msgid == 11)
        #expect(reply.0.data.map { String(decoding: $0, as: UTF8.self) } == "cross-1", "the child's handler context")
        #expect(reply.1 == "cross-1", "the reply's handler context")

        let answer = try await within("cross-2") { try await peer.sendRequest(msgid: 20, timeout: .seconds(30)) }
        #expect(answer.data.map { String(decoding: $0, as: UTF8.self) } == "cross-2")
        try peer.send(msgid: 30, from: inbox, timeout: .seconds(30))
        let untraced = try #require(received.wait(for: 3))[2]
        #expect(untraced.0.data.map { String(decoding: $0, as: UTF8.self) } == "none")
        #expect(untraced.1 == "none")

        try peer.send(msgid: 99, timeout: .seconds(30))
        var status: Int32 = 0
        #expect(waitpid(child.pid, &status, 0) == child.pid)
        #expect(status == 0, "TracingPortPeer echo exited with status \(status)")
    }

    @Test("§3.49 a distributed call: the target runs within the caller's context; a client span and a server span named after the target, in one trace")
    func distributedCall() async throws {
        let server = PortActorSystem()
        defer { server.shutdown() }
        let greeter = Greeter(actorSystem: server)
        let name = "rlk-tracing-\(getpid()).greeter"
        try server.publish(greeter, as: name)
        let client = PortActorSystem()
        defer { client.shutdown() }
        let remote = try Greeter.resolve(id: .named(name), using: client)
        #expect(__isRemoteActor(remote))
        #expect(try await within("distributed") { try await remote.traceID() } == "distributed")

        var spans: [FinishedInMemorySpan] = []
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            spans = tracer.finishedSpans.filter { $0.operationName.contains("traceID") }
            if spans.count >= 2 { break }
            try await Task.sleep(for: .milliseconds(1))
        }
        let clientSpan = try #require(spans.first { $0.kind == .client }, "\(spans.map(\.operationName))")
        let serverSpan = try #require(spans.first { $0.kind == .server }, "\(spans.map(\.operationName))")
        #expect(clientSpan.operationName == serverSpan.operationName)
        #expect(clientSpan.traceID == serverSpan.traceID)
        #expect(serverSpan.parentSpanID == clientSpan.spanID)
    }

    @Test("§3.49 without PortTracing.install() a send within a context adds nothing: the frame has no METADATA")
    func withoutInstallNothingAdded() throws {
        var pair: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0)
        defer { close(pair[0]) }
        let child = try spawnDaemon(try builtExecutable("TracingPortPeer"), ["no-install"], environment: [:],
                                    listeningSocket: pair[1], activationName: "tracing")
        close(pair[1])
        defer { close(child.output) }
        #expect(pollReady(pair[0], before: .now + .seconds(60)))
        var buffer = [UInt8](repeating: 0, count: 65537)
        let length = buffer.withUnsafeMutableBytes { recv(pair[0], $0.baseAddress, $0.count, 0) }
        // The frame of one DATA "x": header, one entry, one byte; flags 0.
        #expect(length == 16 + 8 + 1)
        #expect(buffer[5] == 0)
        var status: Int32 = 0
        #expect(waitpid(child.pid, &status, 0) == child.pid)
        #expect(status == 0)
    }
}
#endif

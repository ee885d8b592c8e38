#if GRPC
import CBenchmarkPeers
import Foundation
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import RunLoopKitGRPC

/// The `xhost` and `xhostrate` workloads: a request/reply round trip of a 64-byte payload over
/// RunLoopKit's gRPC bridge on loopback, beside grpc-swift's own bidirectional echo carrying the
/// same payload over the same transport, configured as the bridge configures it (flush
/// coalescing off) — the floor under any port bridge built on it, and the bars' peer. The echo
/// with gRPC's default configuration (each flush held up to 100 µs for more writes to join it)
/// is a reference beside them. Client and server run in the case's process, plaintext on
/// 127.0.0.1.
///
/// `xhost` times round trips one at a time; `xhostrate` keeps `window` of them in flight and
/// counts round trips per second. Each reply is checked against the payload it answers.
enum GRPCBridgePeer {
    /// Round trips in flight for the rate.
    static let window = GRPCBridgeWindow.roundTrips
    static let payload = Data((0..<64).map { UInt8(truncatingIfNeeded: $0 &* 37) })

    static func latency(_ peer: Peer, _ plan: LatencyPlan) -> LatencyMeasurement {
        blocking { try await withLink(peer) { link in try await measureLatency(link, plan) } }
    }

    static func rate(_ peer: Peer, _ plan: StreamPlan) -> StreamMeasurement {
        blocking { try await withLink(peer) { link in try await measureRate(link, plan) } }
    }

    /// A round-trip channel: `send` puts one request on the wire, `receive` waits for the next
    /// reply and checks it.
    struct Link: Sendable {
        var send: @Sendable () async throws -> Void
        var receive: @Sendable () async throws -> Void
    }

    // MARK: - Measuring

    private static func measureLatency(_ link: Link, _ plan: LatencyPlan) async throws -> LatencyMeasurement {
        for _ in 0..<plan.warmup {
            try await link.send()
            try await link.receive()
        }
        let samples = SampleBuffer(capacity: plan.capacity)
        var count = 0, sameCPU = 0
        let allocationsBegin = bench_alloc_snapshot()
        let end = ContinuousClock.now + plan.budget
        while count < plan.capacity && ContinuousClock.now < end {
            let cpu = bench_current_cpu()
            let start = ContinuousClock.now
            try await link.send()
            try await link.receive()
            samples.storage[count] = (ContinuousClock.now - start).nanoseconds
            if bench_current_cpu() == cpu { sameCPU += 1 }
            count += 1
        }
        let allocations = AllocationWindow(begin: allocationsBegin, end: bench_alloc_snapshot())
        return LatencyMeasurement(samples: samples, count: count, sameCPU: sameCPU, messages: count * 2,
                                  allocations: allocations)
    }

    private static func measureRate(_ link: Link, _ plan: StreamPlan) async throws -> StreamMeasurement {
        for _ in 0..<window { try await link.send() }
        for _ in 0..<min(plan.warmup, 10_000) {
            try await link.receive()
            try await link.send()
        }
        let rssBegin = bench_rss_bytes()
        let allocationsBegin = bench_alloc_snapshot()
        let start = ContinuousClock.now
        let end = start + plan.budget
        var roundTrips = 0
        while roundTrips < plan.maxMessages && ContinuousClock.now < end {
            try await link.receive()
            try await link.send()
            roundTrips += 1
        }
        let elapsed = (ContinuousClock.now - start).nanoseconds
        let allocations = AllocationWindow(begin: allocationsBegin, end: bench_alloc_snapshot())
        let rssEnd = bench_rss_bytes()
        for _ in 0..<window { try await link.receive() }
        return StreamMeasurement(messages: roundTrips, elapsedNanoseconds: elapsed, allocations: allocations,
                                 rssBegin: rssBegin, rssEnd: rssEnd)
    }

    // MARK: - The peers

    private static func withLink<Result: Sendable>(_ peer: Peer,
                                                   _ body: @escaping @Sendable (Link) async throws -> Result) async throws -> Result {
        switch peer {
        case .grpcEcho: try await withEcho(coalescing: false, body)
        case .grpcEchoDefaults: try await withEcho(coalescing: true, body)
        case .runLoopKit: try await withBridge(body)
        default: fail("no peer \(peer.rawValue) for xhost")
        }
    }

    /// grpc-swift's bidirectional echo, with its default transport configuration or with flush
    /// coalescing off on both sides, as the bridge runs.
    private static func withEcho<Result: Sendable>(coalescing: Bool,
                                                   _ body: @escaping @Sendable (Link) async throws -> Result) async throws -> Result {
        var serverConfig = HTTP2ServerTransport.Posix.Config.defaults
        var clientConfig = HTTP2ClientTransport.Posix.Config.defaults
        if !coalescing {
            serverConfig.connection.flushCoalescing = nil
            clientConfig.connection.flushCoalescing = nil
        }
        let server = GRPCServer(transport: HTTP2ServerTransport.Posix(address: .ipv4(host: "127.0.0.1", port: 0),
                                                                      transportSecurity: .plaintext, config: serverConfig),
                                services: [EchoService()])
        let serving = Task { try await server.serve() }
        guard let port = try await server.listeningAddress?.ipv4?.port else { fail("grpc echo: the server did not listen") }
        let transport = try HTTP2ClientTransport.Posix(target: .ipv4(address: "127.0.0.1", port: port),
                                                       transportSecurity: .plaintext, config: clientConfig)
        let bytes = Array(payload)
        let result = try await withGRPCClient(transport: transport) { client in
            let (requests, continuation) = AsyncStream.makeStream(of: [UInt8].self)
            return try await client.bidirectionalStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for await message in requests { try await writer.write(message) }
                },
                descriptor: EchoService.method, serializer: Bytes(), deserializer: Bytes(), options: .defaults
            ) { response in
                let replies = Confined(response.messages.makeAsyncIterator())
                defer { continuation.finish() }
                return try await body(Link(
                    send: { continuation.yield(bytes) },
                    receive: {
                        guard try await replies.value.next() == bytes else { fail("grpc echo: a wrong or missing reply") }
                    }))
            }
        }
        server.beginGracefulShutdown()
        _ = try? await serving.value
        return result
    }

    /// RunLoopKit over the bridge: a port on a resident thread, exported under a name, and a
    /// proxy for it from a `PortBridgeClient`; replies come to one long-lived reply port, as the
    /// echo's to its one response stream.
    private static func withBridge<Result: Sendable>(_ body: @escaping @Sendable (Link) async throws -> Result) async throws -> Result {
        let thread = ResidentThread(name: "exported")
        let exported = try MessagePort(queueLimit: 1024)
        exported.setHandler { message in
            try? message.replyPort?.send(msgid: message.msgid, components: message.components, timeout: .seconds(10))
        }
        thread.runLoop.add(exported, forMode: .default)
        let server = try PortBridgeServer(host: "127.0.0.1", port: 0, security: .plaintext())
        try server.exporter.export(exported, as: "bench.echo", access: .anyone)
        let serving = Task { try await server.run() }
        let client = try PortBridgeClient(host: "127.0.0.1", port: try await server.listeningPort, security: .plaintext())
        let running = Task { try await client.run() }
        let proxy = try await client.connect(to: "bench.echo", queueLimit: 1024)
        let replies = try MessagePort(queueLimit: 1024)
        let iterator = Confined(replies.messages().makeAsyncIterator())
        let sent = Confined<UInt32>(0), received = Confined<UInt32>(0)
        let result = try await body(Link(
            send: {
                try await proxy.send(msgid: sent.value, components: [.data(payload)], from: replies)
                sent.value &+= 1
            },
            receive: {
                guard let echo = await iterator.value.next(), echo.msgid == received.value, echo.data == payload else {
                    fail("RunLoopKit xhost: a wrong or missing reply")
                }
                received.value &+= 1
            }))
        proxy.invalidate()
        client.shutDown()
        server.shutDown()
        _ = try? await running.value
        _ = try? await serving.value
        exported.invalidate()
        replies.invalidate()
        thread.stop()
        return result
    }

    /// Runs `body` on the cooperative pool and waits for it: a case's child process measures
    /// from its main thread.
    private static func blocking<Result: Sendable>(_ body: @escaping @Sendable () async throws -> Result) -> Result {
        let box = ResultBox<Result>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do { box.value = .success(try await body()) } catch { box.value = .failure(error) }
            done.signal()
        }
        done.wait()
        switch box.value! {
        case .success(let result): return result
        case .failure(let error): fail("xhost: \(error)")
        }
    }
}

/// The outcome of `GRPCBridgePeer.blocking`, written by the task before it signals.
private final class ResultBox<Value>: @unchecked Sendable {
    var value: Result<Value, any Error>?
}

/// State of one measuring task (an iterator, a counter), which its link's closures share: they
/// are called by that task alone, one at a time.
private final class Confined<Value>: @unchecked Sendable {
    var value: Value
    init(_ value: Value) { self.value = value }
}

/// Bytes as gRPC messages, unchanged.
private struct Bytes: MessageSerializer, MessageDeserializer {
    func serialize<B: GRPCContiguousBytes>(_ message: [UInt8]) throws -> B { B(message) }
    func deserialize<B: GRPCContiguousBytes>(_ bytes: B) throws -> [UInt8] { bytes.withUnsafeBytes { Array($0) } }
}

/// One bidirectional-streaming method that writes back every message it reads.
private struct EchoService: RegistrableRPCService {
    static let method = MethodDescriptor(fullyQualifiedService: "bench.Echo", method: "Stream")
    func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: Self.method, deserializer: Bytes(), serializer: Bytes()) { request, _ in
            StreamingServerResponse { writer in
                for try await message in request.messages { try await writer.write(message) }
                return [:]
            }
        }
    }
}
#endif

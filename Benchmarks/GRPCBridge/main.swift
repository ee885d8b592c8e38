// The xhost benchmark: a request/reply round trip over the gRPC bridge on loopback, beside
// grpc-swift's own bidirectional echo carrying the same payload over the same transport,
// configured as the bridge configures it (flush coalescing off) — the floor under any port
// bridge built on it, and the bars' peer. A second echo with gRPC's default configuration
// (each flush held up to 100 µs for more writes to join it) is reported beside them. All run in
// this process, client and server, plaintext on 127.0.0.1.
//
//   swift run -c release GRPCBridgeBenchmark [--pinned] [--round-trips N] [--payload BYTES]
//
// `--pinned` confines every thread of the process to CPU 0 (the stable measure of software
// cost); without it threads go where the scheduler puts them.
#if canImport(Glibc)
import Glibc
#endif
import CBenchmarkPeers
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import RunLoopKitGRPC

struct Options {
    var pinned = false
    var roundTrips = 20_000
    var payload = 64
    var window = 64

    init(_ arguments: [String]) {
        var rest = arguments[...]
        while let flag = rest.popFirst() {
            switch flag {
            case "--pinned": pinned = true
            case "--round-trips": roundTrips = rest.popFirst().flatMap { Int($0) } ?? roundTrips
            case "--payload": payload = rest.popFirst().flatMap { Int($0) } ?? payload
            default:
                print("usage: GRPCBridgeBenchmark [--pinned] [--round-trips N] [--payload BYTES]")
                exit(2)
            }
        }
    }
}

/// Confines the calling thread, and every thread it creates afterwards, to CPU 0 (before
/// any await: the concurrency pool's threads, NIO's and ours are all made later).
func pinToFirstCPU() {
    guard bench_pin_current_thread_to_first_cpu() == 0 else {
        print("sched_setaffinity failed: cannot pin to one CPU")
        exit(1)
    }
}

/// One row: round-trip latencies (sequential) and the rate with `window` requests in flight.
struct Row {
    let name: String
    var latencies: [Duration]
    var perSecond: Double

    func percentile(_ p: Double) -> Duration {
        let sorted = latencies.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }

    var line: String {
        func us(_ d: Duration) -> String {
            let value = Double(d.components.seconds) * 1e6 + Double(d.components.attoseconds) / 1e12
            return String(Int(value * 10)).count > 0 ? "\(Double(Int(value * 10)) / 10)" : "0"
        }
        return "\(name.padding(toLength: 26, withPad: " ", startingAt: 0)) p50 \(us(percentile(0.5))) µs  p99 \(us(percentile(0.99))) µs  \(Int(perSecond)) round trips/s"
    }
}

let options = Options(Array(CommandLine.arguments.dropFirst()))
if options.pinned { pinToFirstCPU() }
let payload = Data((0..<options.payload).map { UInt8(truncatingIfNeeded: $0) })

// MARK: - grpc-swift's bidirectional echo

struct Bytes: MessageSerializer, MessageDeserializer {
    func serialize<B: GRPCContiguousBytes>(_ message: [UInt8]) throws -> B { B(message) }
    func deserialize<B: GRPCContiguousBytes>(_ bytes: B) throws -> [UInt8] { bytes.withUnsafeBytes { Array($0) } }
}

struct EchoService: RegistrableRPCService {
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

/// The echo's round trips, with gRPC's default transport configuration or with flush
/// coalescing off on both sides, as the bridge runs.
func measureGRPCEcho(coalescing: Bool) async throws -> Row {
    let name = coalescing ? "grpc-swift echo, defaults" : "grpc-swift bidi echo"
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
    guard let port = try await server.listeningAddress?.ipv4?.port else { fatalError("echo server did not listen") }
    let transport = try HTTP2ClientTransport.Posix(target: .ipv4(address: "127.0.0.1", port: port),
                                                   transportSecurity: .plaintext, config: clientConfig)
    var row = Row(name: name, latencies: [], perSecond: 0)
    try await withGRPCClient(transport: transport) { client in
        let (requests, continuation) = AsyncStream.makeStream(of: [UInt8].self)
        let bytes = Array(payload)
        row = try await client.bidirectionalStreaming(
            request: StreamingClientRequest(of: [UInt8].self) { writer in
                for await message in requests { try await writer.write(message) }
            },
            descriptor: EchoService.method, serializer: Bytes(), deserializer: Bytes(), options: .defaults
        ) { response in
            var iterator = response.messages.makeAsyncIterator()
            var latencies: [Duration] = []
            latencies.reserveCapacity(options.roundTrips)
            for _ in 0..<options.roundTrips {
                let start = ContinuousClock.now
                continuation.yield(bytes)
                guard let echo = try await iterator.next(), echo == bytes else { fatalError("grpc echo: wrong reply") }
                latencies.append(ContinuousClock.now - start)
            }
            let start = ContinuousClock.now
            for _ in 0..<options.window { continuation.yield(bytes) }
            for index in 0..<options.roundTrips {
                guard try await iterator.next() == bytes else { fatalError("grpc echo: wrong reply") }
                if index + options.window < options.roundTrips { continuation.yield(bytes) }
            }
            let rate = Double(options.roundTrips) / ((ContinuousClock.now - start) / .seconds(1))
            continuation.finish()
            return Row(name: name, latencies: latencies, perSecond: rate)
        }
    }
    server.beginGracefulShutdown()
    _ = try? await serving.value
    return row
}

// MARK: - RunLoopKit over the bridge

func measureBridge() async throws -> Row {
    let thread = ResidentThread(name: "exported")
    let exported = try MessagePort(queueLimit: 1024)
    exported.setHandler { message in try? message.replyPort?.send(msgid: message.msgid, components: message.components, timeout: .seconds(10)) }
    thread.runLoop.add(exported, forMode: .default)
    let server = try PortBridgeServer(host: "127.0.0.1", port: 0, security: .plaintext())
    try server.exporter.export(exported, as: "bench.echo", access: .anyone)
    let serving = Task { try await server.run() }
    let client = try PortBridgeClient(host: "127.0.0.1", port: try await server.listeningPort, security: .plaintext())
    let running = Task { try await client.run() }
    let proxy = try await client.connect(to: "bench.echo", queueLimit: 1024)

    // The reply port is long-lived, as the echo's response stream is.
    let replies = try MessagePort(queueLimit: 1024)
    var iterator = replies.messages().makeAsyncIterator()
    var latencies: [Duration] = []
    latencies.reserveCapacity(options.roundTrips)
    for index in 0..<options.roundTrips {
        let start = ContinuousClock.now
        try await proxy.send(msgid: UInt32(truncatingIfNeeded: index), components: [.data(payload)], from: replies)
        guard let echo = await iterator.next(), echo.data == payload else { fatalError("bridge: wrong reply") }
        latencies.append(ContinuousClock.now - start)
    }
    let start = ContinuousClock.now
    for index in 0..<options.window { try await proxy.send(msgid: UInt32(index), components: [.data(payload)], from: replies) }
    for index in 0..<options.roundTrips {
        guard let echo = await iterator.next(), echo.data == payload else { fatalError("bridge: wrong reply") }
        if index + options.window < options.roundTrips {
            try await proxy.send(msgid: UInt32(truncatingIfNeeded: index), components: [.data(payload)], from: replies)
        }
    }
    let rate = Double(options.roundTrips) / ((ContinuousClock.now - start) / .seconds(1))
    proxy.invalidate()
    client.shutDown()
    server.shutDown()
    _ = try? await running.value
    _ = try? await serving.value
    exported.invalidate()
    thread.stop()
    return Row(name: "RunLoopKit xhost", latencies: latencies, perSecond: rate)
}

#if DEBUG
print("Debug build: these figures are not meaningful; run `swift run -c release GRPCBridgeBenchmark`.")
#endif
print("xhost: \(options.roundTrips) round trips of \(options.payload) bytes, \(options.window) in flight for the rate, \(options.pinned ? "pinned to CPU 0" : "unpinned")")
let defaultEcho = try await measureGRPCEcho(coalescing: true)
let echo = try await measureGRPCEcho(coalescing: false)
let bridge = try await measureBridge()
print(defaultEcho.line)
print(echo.line)
print(bridge.line)
let p50 = (bridge.percentile(0.5) / echo.percentile(0.5))
let rate = bridge.perSecond / echo.perSecond
print("RunLoopKit xhost / grpc-swift echo: p50 \((p50 * 100).rounded() / 100)× (bar ≤ 1.1×), rate \((rate * 100).rounded() / 100)× (bar ≥ 0.9×)")

// example-client: connects to example-daemon by name, sends requests with sendRequest, checks
// and prints each reply, and exits non-zero on the first error.
//
//   example-client [--name NAME] [--count N] [--rounds R] [--quiet] [--distributed]
//                  [--grpc HOST:PORT [--grpc-tls CERT KEY CA]]
//
// With --distributed it calls the daemon's distributed actor (ExampleService, published beside
// the service port) instead of sending requests to the port.
// With --grpc it reaches the daemon's service port over the gRPC bridge (the daemon started
// with --grpc) instead of by local name: plaintext on loopback, or mutual TLS.
#if canImport(Glibc)
import Glibc
#endif
import ExampleWire
import RunLoopKit
import RunLoopKitDistributed
#if GRPC
import RunLoopKitGRPC
#endif

func fail(_ text: String) -> Never {
    var line = Array("example-client: \(text)\n".utf8)
    _ = write(STDERR_FILENO, &line, line.count)
    exit(1)
}

let usage = "usage: example-client [--name NAME] [--count N] [--rounds R] [--quiet] [--distributed] [--grpc HOST:PORT [--grpc-tls CERT KEY CA]]"
var name = Wire.defaultName, count: UInt64 = 10, rounds: UInt64 = 1_000, quiet = false
var grpcAddress: String?, grpcTLS: [String] = [], distributed = false
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    if flag == "--quiet" {
        quiet = true
        continue
    }
    if flag == "--distributed" {
        distributed = true
        continue
    }
    if flag == "--grpc-tls" {
        grpcTLS = Array(arguments.prefix(3))
        guard grpcTLS.count == 3 else { fail(usage) }
        arguments.removeFirst(3)
        continue
    }
    guard let value = arguments.popFirst() else { fail(usage) }
    switch (flag, UInt64(value)) {
    case ("--name", _): name = value
    case ("--count", let number?): count = number
    case ("--rounds", let number?): rounds = number
    case ("--grpc", _): grpcAddress = value
    default: fail(usage)
    }
}

if distributed {
    let system = PortActorSystem()
    system.callTimeout = .seconds(10)
    let actorName = Wire.actorName(for: name)
    let service: ExampleService
    do { service = try ExampleService.resolve(id: .named(actorName), using: system) } catch {
        fail("cannot resolve '\(actorName)': \(error)")
    }
    var key: UInt64 = 0
    while key < count {
        key += 1
        let result: UInt64
        do { result = try await service.work(key: key, rounds: rounds) } catch { fail("call \(key): \(error)") }
        guard result == Wire.work(key: key, rounds: rounds) else { fail("call \(key): wrong result \(result)") }
        if !quiet { print("result \(key): \(String(result, radix: 16))") }
    }
    system.shutdown()
    print("done: \(count) correct results from \(actorName)")
    exit(0)
}

let service: MessagePort
if let grpcAddress {
    #if GRPC
    guard let colon = grpcAddress.lastIndex(of: ":"), let port = Int(grpcAddress[grpcAddress.index(after: colon)...]) else {
        fail(usage)
    }
    let host = String(grpcAddress[..<colon])
    let security: BridgeSecurity = grpcTLS.isEmpty ? .plaintext()
        : .mutualTLS(certificateChain: [.file(path: grpcTLS[0], format: .pem)], privateKey: .file(path: grpcTLS[1], format: .pem),
                     trustRoots: [.file(path: grpcTLS[2], format: .pem)])
    do {
        let client = try PortBridgeClient(host: host, port: port, security: security)
        Task { try await client.run() }
        service = try await client.connect(to: name)
    } catch {
        fail("cannot connect to '\(name)' at \(grpcAddress): \(error)")
    }
    #else
    fail("this build has no gRPC bridge (RUNLOOPKIT_CORE_ONLY was set)")
    #endif
} else {
    do { service = try MessagePort.connect(to: name) } catch { fail("cannot connect to '\(name)': \(error)") }
}
var key: UInt64 = 0
while key < count {
    key += 1
    let reply: MessagePort.Message
    do {
        // A private reply mode: while it waits, this thread's loop services the reply only.
        reply = try service.sendRequest(msgid: Wire.request, components: [Wire.encode(key, rounds)],
                                        timeout: .seconds(10), replyMode: "example-client.reply")
    } catch {
        fail("request \(key): \(error)")
    }
    if let refusal = Wire.decode(reply, msgid: Wire.refused, count: 2) {
        fail("request \(key): refused (\(Wire.Refusal(rawValue: refusal[1]).map(String.init(describing:)) ?? "reason \(refusal[1])"))")
    }
    guard let words = Wire.decode(reply, msgid: Wire.reply, count: 2), words[0] == key else {
        fail("request \(key): malformed reply \(reply)")
    }
    guard words[1] == Wire.work(key: key, rounds: rounds) else { fail("request \(key): wrong result \(words[1])") }
    if !quiet { print("reply \(key): \(String(words[1], radix: 16))") }
}
print("done: \(count) correct replies from \(name)")

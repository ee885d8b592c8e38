#if GRPC
// The other process of the bridge tests: exports a port over a plaintext loopback bridge and
// prints "listening PORT" once the server listens.
//
//   GRPCPortPeer NAME echo     replies to each message's reply port with its msgid and data
//   GRPCPortPeer NAME silent   receives and never replies
//   GRPCPortPeer NAME stall    queues (limit 4) and does not receive until a line on stdin
#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit
import RunLoopKitGRPC

let arguments = CommandLine.arguments
guard arguments.count == 3, ["echo", "silent", "stall"].contains(arguments[2]) else {
    say("usage: GRPCPortPeer NAME echo|silent|stall", to: STDERR_FILENO)
    exit(2)
}
let name = arguments[1]
let mode = arguments[2]

let thread = ResidentThread(name: "service")
let port = try MessagePort(queueLimit: mode == "stall" ? 4 : 1024)
let echo: @Sendable (MessagePort.Message) -> Void = { message in
    try? message.replyPort?.send(msgid: message.msgid, components: message.components, timeout: .seconds(10))
}
switch mode {
case "echo": port.setHandler(echo)
case "silent": port.setHandler { _ in }
default: break
}
thread.runLoop.add(port, forMode: .default)

// The test's line on stdin resumes receiving (stall mode); the end of stdin ends the process:
// the test holds stdin open while it needs the peer, so a test that ended or died never leaves
// a peer behind. (A thread kept for the process's life: dropping it would wait for the read.)
let reader = ResidentThread(name: "stdin")
try reader.perform {
    var byte: UInt8 = 0
    if mode == "stall" {
        while read(STDIN_FILENO, &byte, 1) == 1 && byte != UInt8(ascii: "\n") {}
        port.setHandler(echo)
    }
    while read(STDIN_FILENO, &byte, 1) == 1 {}
    exit(0)
}

// Accepts the liveness tests' client pings (every 3 s); pings its clients only after a minute.
let server = try PortBridgeServer(host: "127.0.0.1", port: 0, security: .plaintext(),
                                  keepalive: BridgeKeepalive(interval: .seconds(60), timeout: .seconds(20),
                                                             minimumClientInterval: .milliseconds(100)))
try server.exporter.export(port, as: name, access: .anyone)
let serving = Task { try await server.run() }
let listening = try await server.listeningPort
say("listening \(listening)", to: STDOUT_FILENO)
try await serving.value

/// One line in one write(2): the test reads it from a pipe as soon as it is written.
func say(_ text: String, to descriptor: Int32) {
    let line = Array((text + "\n").utf8)
    _ = line.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
}
#else
fatalError("built without the GRPC trait: build with --enable-all-traits")
#endif

// IntrospectionHost: the daemon `runloopctl` inspects in the introspection tests (Guarantees
// §3.44–3.48). One scenario per invocation:
//
//   serve NAME   publishes a port as NAME on the main loop (label "requests"; a request gets
//                a reply of msgid + 1 carrying "echo:" and the request's bytes; msgid 13 gets
//                a reply of two components, bytes 00 ff and a port; msgid 77 with the text N
//                sends N messages to the worker's port "sink" first), runs a resident thread
//                "worker" with a timer "tick" and the port "sink", prints "ready", and runs
//                until killed.
//                Introspection is on when RUNLOOPKIT_INTROSPECTION=1.
//   counts       the process's threads, descriptors and endpoint with introspection off, on
//                (Introspection.enable()) and off again (disable()), one "key: value" line each.
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = write(STDOUT_FILENO, &bytes, bytes.count)
}

func entries(_ directory: String) -> Int {
    guard let handle = opendir(directory) else { return -1 }
    defer { closedir(handle) }
    var count = 0
    while let entry = readdir(handle) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if name != "." && name != ".." { count += 1 }
    }
    return count
}

/// Whether the kernel lists this process's introspection endpoint.
func endpointListed() -> Bool {
    guard let file = fopen("/proc/net/unix", "r") else { return false }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 512)
    let wanted = "@runloopkit-introspection/\(getpid())"
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.split(whereSeparator: { $0 == " " || $0 == "\n" }).last.map(String.init) == wanted { return true }
    }
    return false
}

func counts(_ stage: String) {
    // The directory stream of /proc/self/fd is itself a descriptor: counted the same each time.
    say("\(stage): threads \(entries("/proc/self/task")), descriptors \(entries("/proc/self/fd")), endpoint \(endpointListed())")
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "serve" where arguments.count > 2:
    let worker = ResidentThread(name: "worker")
    let sink = try MessagePort()
    sink.label = "sink"
    sink.setHandler { _ in }
    worker.runLoop.add(sink, forMode: .default)
    let port = try MessagePort()
    port.label = "requests"
    port.setHandler { message in
        guard let reply = message.replyPort else { return }
        if message.msgid == 77 {
            let count = Int(String(decoding: message.data ?? Data(), as: UTF8.self)) ?? 0
            for index in 0..<count { try? sink.send(msgid: UInt32(index), components: [.data(Data("x".utf8))], timeout: .seconds(5)) }
        }
        if message.msgid == 13 {
            let extra = try? MessagePort()
            try? reply.send(msgid: 14, components: [.data(Data([0x00, 0xff]))] + (extra.map { [.port($0)] } ?? []), timeout: .seconds(5))
            return
        }
        try? reply.send(msgid: message.msgid &+ 1, components: [.data(Data("echo:".utf8) + (message.data ?? Data()))], timeout: .seconds(5))
    }
    ThreadRunLoop.main.add(port, forMode: .default)
    try port.publish(as: arguments[2])
    let tick = RunLoopTimer(fireAt: .now + .seconds(3600), interval: .seconds(3600)) { _ in }
    tick.label = "tick"
    worker.runLoop.add(tick, forMode: .default)
    say("ready")
    while true { _ = ThreadRunLoop.main.run(mode: .default, for: .seconds(3600), returnAfterSourceHandled: false) }
case "counts":
    _ = ThreadRunLoop.current
    counts("off")
    try Introspection.enable()
    counts("on")
    say("enabled: \(Introspection.isEnabled)")
    Introspection.disable()
    counts("off again")
    say("enabled: \(Introspection.isEnabled)")
default:
    say("usage: IntrospectionHost serve NAME | counts")
    exit(2)
}

// example-client: connects to example-daemon by name, sends requests with sendRequest, checks
// and prints each reply, and exits non-zero on the first error.
//
//   example-client [--name NAME] [--count N] [--rounds R] [--quiet]
#if canImport(Glibc)
import Glibc
#endif
import ExampleWire
import RunLoopKit

func fail(_ text: String) -> Never {
    var line = Array("example-client: \(text)\n".utf8)
    _ = write(STDERR_FILENO, &line, line.count)
    exit(1)
}

let usage = "usage: example-client [--name NAME] [--count N] [--rounds R] [--quiet]"
var name = Wire.defaultName, count: UInt64 = 10, rounds: UInt64 = 1_000, quiet = false
var arguments = CommandLine.arguments.dropFirst()
while let flag = arguments.popFirst() {
    if flag == "--quiet" {
        quiet = true
        continue
    }
    guard let value = arguments.popFirst() else { fail(usage) }
    switch (flag, UInt64(value)) {
    case ("--name", _): name = value
    case ("--count", let number?): count = number
    case ("--rounds", let number?): rounds = number
    default: fail(usage)
    }
}

let service: MessagePort
do { service = try MessagePort.connect(to: name) } catch { fail("cannot connect to '\(name)': \(error)") }
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
    if Wire.decode(reply, msgid: Wire.refused, count: 1) != nil { fail("request \(key): refused (the daemon is stopping)") }
    guard let words = Wire.decode(reply, msgid: Wire.reply, count: 2), words[0] == key else {
        fail("request \(key): malformed reply \(reply)")
    }
    guard words[1] == Wire.work(key: key, rounds: rounds) else { fail("request \(key): wrong result \(words[1])") }
    if !quiet { print("reply \(key): \(String(words[1], radix: 16))") }
}
print("done: \(count) correct replies from \(name)")

import FoundationEssentials
import RunLoopKit

// The receiving side: a port on a resident thread, served by a delegate (or a handler).
final class Uppercaser: MessagePort.Delegate {
    func handlePortMessage(_ message: MessagePort.Message) {     // on the "uppercaser" thread
        let text = String(decoding: message.data ?? Data(), as: UTF8.self)
        let answerTo = message.replyPort ?? message.port(at: 1)     // the `from:` port, or one sent along
        try? answerTo?.send(msgid: message.msgid, components: [.data(Data(text.uppercased().utf8))],
                            timeout: .seconds(1))
    }
}
let worker = ResidentThread(name: "uppercaser")
let uppercaser = Uppercaser()                                    // held weakly by the port: keep it
let service = try MessagePort(queueLimit: 64)
service.delegate = uppercaser
worker.runLoop.add(service, forMode: .default)

// The sending side: each request names the port its reply goes to.
let replies = try MessagePort()
replies.setHandler { reply in                                    // on this thread, while its loop runs
    print("reply \(reply.msgid):", String(decoding: reply.data ?? Data(), as: UTF8.self))
}
ThreadRunLoop.current.add(replies, forMode: .default)
for (msgid, word) in [(1, "one"), (2, "two"), (3, "three")] as [(UInt32, String)] {
    try service.send(msgid: msgid, components: [.data(Data(word.utf8))], from: replies, timeout: .seconds(1))
}
for _ in 1...3 {                                                 // one reply per return
    ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))
}

// A port can also travel as a component, here without a `from:` port.
try service.send(msgid: 4, components: [.data(Data("four".utf8)), .port(replies)], timeout: .seconds(1))
ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))

// Batches: a batch handler gets everything one pass took, in one call, each message its own.
let log = try MessagePort()
log.setBatchHandler { batch in                                   // once per pass, on this thread
    var words: [String] = []
    while let message = batch.next() { words.append(String(decoding: message.data ?? Data(), as: UTF8.self)) }
    print("one call, \(words.count) messages:", words.joined(separator: " "))
    ThreadRunLoop.current.stop()
}
ThreadRunLoop.current.add(log, forMode: .default)
for word in ["alpha", "beta", "gamma"] {
    try log.send(msgid: 5, components: [.data(Data(word.utf8))], timeout: .seconds(1))
}
ThreadRunLoop.current.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
log.invalidate()

// Backpressure: with no receiver, messages wait; a full queue makes send wait until its deadline.
let mailbox = try MessagePort(queueLimit: 2)
try mailbox.send(msgid: 1, timeout: .zero)
try mailbox.send(msgid: 2, timeout: .zero)
do {
    try mailbox.send(msgid: 3, timeout: .milliseconds(10))
} catch {
    print("third send:", error)                                  // PortError.timedOut
}
print("queued:", mailbox.queuedCount)

// Invalidation: pending and future senders get .invalidPort; queued messages are discarded.
mailbox.setInvalidationHandler { port in print("invalidated, discarded:", port.discardedCount) }
mailbox.invalidate()
do {
    try mailbox.send(msgid: 4, timeout: .seconds(1))
} catch {
    print("send to an invalid port:", error)
}

service.invalidate()
worker.stop()

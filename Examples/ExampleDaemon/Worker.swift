import ExampleWire
import RunLoopKit

/// A resident thread whose loop serves the requests the main thread hands it: it answers the
/// client directly, then tells the main thread the request is done.
final class Worker: Sendable {
    let thread: ResidentThread
    let inbox: MessagePort

    init(name: String, done: MessagePort) throws(PortError) {
        inbox = try MessagePort(queueLimit: 256)
        inbox.label = "\(name) inbox"
        thread = ResidentThread(name: name)
        inbox.setHandler { message in   // runs on the worker's thread
            guard let request = Wire.decode(message, msgid: Wire.request, count: 3), let client = message.port(at: 1) else {
                return log("\(name): malformed message \(message.msgid) dropped")
            }
            let (id, key, rounds) = (request[0], request[1], request[2])
            var sent: UInt64 = 1
            do {
                try client.send(msgid: Wire.reply, components: [Wire.encode(key, Wire.work(key: key, rounds: rounds))],
                                timeout: .seconds(1))
            } catch {
                sent = 0
                log("\(name): reply to request \(id) failed: \(error)")
            }
            do {
                try done.send(msgid: Wire.done, components: [Wire.encode(id, sent)], timeout: .seconds(1))
            } catch {
                log("\(name): could not report request \(id) done: \(error)")
            }
        }
        thread.runLoop.add(inbox, forMode: .default)
    }

    /// Stops the thread (waits for it to exit), then closes the inbox.
    func stop() {
        thread.stop()
        inbox.invalidate()
    }
}

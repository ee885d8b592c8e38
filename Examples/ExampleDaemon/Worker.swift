import FoundationEssentials
import RunLoopKit

/// The main ↔ worker protocol: a request is `[id, rounds]`, a reply `[id, result]`, each one
/// `.data` component of 64-bit words; replies go to the request's `replyPort`.
enum Wire {
    static let request: UInt32 = 1
    static let reply: UInt32 = 2

    static func encode(_ words: UInt64...) -> [MessagePort.Message.Component] {
        [.data(words.withUnsafeBytes { Data($0) })]
    }

    static func decode(_ message: MessagePort.Message, msgid: UInt32) -> [UInt64]? {
        guard message.msgid == msgid, message.components.count == 1,
              case .data(let bytes) = message.components[0], bytes.count == 16 else { return nil }
        return bytes.withUnsafeBytes { raw in (0..<2).map { raw.loadUnaligned(fromByteOffset: $0 * 8, as: UInt64.self) } }
    }
}

/// A resident thread whose loop serves the requests arriving on its inbox port.
final class Worker: Sendable {
    let thread: ResidentThread
    let inbox: MessagePort

    init(name: String) throws(PortError) {
        inbox = try MessagePort(queueLimit: 256)
        thread = ResidentThread(name: name)
        inbox.setHandler { message in   // runs on the worker's thread
            guard let request = Wire.decode(message, msgid: Wire.request) else {
                return log("\(name): malformed message \(message.msgid) dropped")
            }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325   // the "work": FNV-1a rounds
            for round in 0..<request[1] { hash = (hash ^ (request[0] &+ round)) &* 0x100_0000_01b3 }
            do {
                try message.replyPort?.send(msgid: Wire.reply, components: Wire.encode(request[0], hash),
                                            timeout: .seconds(1))
            } catch {
                log("\(name): reply to request \(request[0]) failed: \(error)")
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

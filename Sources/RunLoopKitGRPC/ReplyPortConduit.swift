#if GRPC
import RunLoopKit

/// The server side's way back to a client's reply port: a message sent to the reply port a
/// bridged message carries becomes a REPLY frame on the stream it came from.
final class ReplyPortConduit: PortConduit {
    let outbox: FrameOutbox
    let replyID: UInt32

    init(outbox: FrameOutbox, replyID: UInt32) {
        self.outbox = outbox
        self.replyID = replyID
    }

    func send(_ message: MessagePort.Message, before deadline: ContinuousClock.Instant?) throws(PortError) {
        try outbox.put(try frame(for: message), before: deadline)
    }

    func send(_ message: MessagePort.Message) async throws(PortError) {
        try await outbox.put(try frame(for: message))
    }

    // The stream outlives one reply port: only the stream's end closes the outbox.
    func proxyInvalidated() {}

    private func frame(for message: MessagePort.Message) throws(PortError) -> [UInt8] {
        // A reply cannot ask for a reply: the REPLY frame has no room for a port.
        guard message.replyPort == nil else { throw .notTransferable }
        let data = try dataComponents(of: message)
        do {
            return try BridgeFrame.reply(msgid: message.msgid, replyID: replyID, data: data).encoded()
        } catch {
            throw .messageTooLarge(limit: BridgeFrame.maximumFrameSize)
        }
    }
}
#endif

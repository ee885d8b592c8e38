#if GRPC
import RunLoopKit

/// The client side's way to a remote port: a proxy's messages become MESSAGE frames in the
/// stream's outbox, with their reply ports numbered by the stream's reply routes.
final class RemotePortConduit: PortConduit {
    let outbox: FrameOutbox
    let routes: ReplyRoutes

    init(outbox: FrameOutbox, routes: ReplyRoutes) {
        self.outbox = outbox
        self.routes = routes
    }

    deinit {
        // The proxy is gone: nothing can send any more, so the stream ends.
        outbox.close()
    }

    func send(_ message: MessagePort.Message, before deadline: ContinuousClock.Instant?) throws(PortError) {
        // A request's time left travels (not the instant: the hosts' clocks share no epoch), for
        // the server to see how long the requester waits. A deadline already past when the frame
        // is queued (a `.zero` timeout, an async request's first try) sets none.
        let timeout = message.replyPort == nil ? nil
            : deadline.map { ContinuousClock.now.duration(to: $0) }.flatMap { $0 > .zero ? $0 : nil }
        try outbox.put(try frame(for: message, timeout: timeout), before: deadline)
    }

    func send(_ message: MessagePort.Message) async throws(PortError) {
        try await outbox.put(try frame(for: message, timeout: nil))
    }

    func proxyInvalidated() { outbox.close() }

    private func frame(for message: MessagePort.Message, timeout: Duration?) throws(PortError) -> [UInt8] {
        let data = try dataComponents(of: message)
        let replyID = message.replyPort.map(routes.id(for:)) ?? 0
        do {
            return try BridgeFrame.message(msgid: message.msgid, replyID: replyID, timeout: timeout, data: data).encoded()
        } catch {
            throw .messageTooLarge(limit: BridgeFrame.maximumFrameSize)
        }
    }
}
#endif

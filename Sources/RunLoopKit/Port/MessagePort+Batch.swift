/// Delivery a pass at a time: a batch handler gets every message one pass of the receiving loop
/// takes from the port in one call, and takes them out one by one, each its own to keep or
/// consume.
extension MessagePort {
    /// The messages one pass of the receiving loop took from a port, for a batch handler
    /// (`setBatchHandler(_:)`) to take in order with `next()`.
    ///
    /// Taking a batch costs one store, whatever its size; `next()` then moves each message out
    /// of the queue, so the handler owns it (a handler or delegate only borrows its message, and
    /// must copy what it keeps). A batch holds at most what the loop's pass may handle: up to
    /// 1,024 messages, or one when the loop runs with `returnAfterSourceHandled` (each message is
    /// one handled source either way). Messages the handler does not take stay queued, first in
    /// line, and are handed to it again in the loop's next pass: a handler should take them all.
    /// Once the port is invalidated `next()` returns nil, and what is left is discarded and
    /// counted. A batch lives only for the handler's call.
    public struct Batch: ~Copyable {
        // The port's, alive for as long as the batch (the port is delivering it): held unmanaged,
        // so that taking a message retains nothing.
        let inbox: Unmanaged<MessageInbox>
        let membership: Unmanaged<LoopMembership>
        /// The first position past the batch.
        let end: UInt64
        /// Messages taken out so far.
        private(set) var taken = 0

        init(of port: MessagePort, end: UInt64) {
            inbox = .passUnretained(port.inbox)
            membership = .passUnretained(port.membership)
            self.end = end
        }

        /// The next message in the order sent (per sender), or nil when the batch is exhausted or
        /// the port was invalidated. The receiving loop's thread, inside the batch handler; a few
        /// loads and stores, no lock.
        public mutating func next() -> MessagePort.Message? {
            guard membership._withUnsafeGuaranteedRef({ $0.isValid }),
                  let message = inbox._withUnsafeGuaranteedRef({ $0.takeHead(before: end) }) else { return nil }
            taken &+= 1
            return message
        }

        /// The trace metadata of the first message not yet taken: the context a batch handler
        /// runs within (`MessageContext`). Receiving loop's thread.
        func firstMetadata() -> MessageMetadata? {
            inbox._withUnsafeGuaranteedRef { $0.headMetadata(before: end) }
        }
    }

    /// Sets (or clears, with nil) a closure that receives the port's messages a pass at a time,
    /// on the receiving loop's thread, instead of one call per message: each call hands it a
    /// `Batch`, whose `next()` gives the messages in the order sent (per sender), each owned by
    /// the handler, which can do once per pass what a handler does once per message (a write, a
    /// flush). It takes precedence over a handler and a delegate. Any thread; a lock.
    public func setBatchHandler(_ handler: (@Sendable (inout Batch) -> Void)?) {
        setReceiver { $0.batchHandler = handler }
    }
}

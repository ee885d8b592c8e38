import Synchronization

/// Send-once rights (§3.50): the reply port of a request takes one message, as a Mach
/// send-once right does. The right is consumed by the first send, not by the delivery, so a
/// responder that sends a second reply — before or after the first was delivered — is told
/// `.invalidPort` instead of being told a message was sent that would only be discarded.
extension MessagePort {
    /// The values of `sendOnceState`.
    enum SendOnce {
        /// An ordinary port: any number of sends.
        static let unlimited: UInt8 = 0
        /// A send-once port whose one send has not been made.
        static let unused: UInt8 = 1
        /// A send-once port that was sent to.
        static let consumed: UInt8 = 2
    }

    /// Makes this port send-once: its first send consumes the right. Any thread; an atomic store.
    func makeSendOnce() {
        sendOnceState.store(SendOnce.unused, ordering: .releasing)
    }

    /// Whether this port takes only one send. Any thread; an atomic load.
    var isSendOnce: Bool { sendOnceState.load(ordering: .acquiring) != SendOnce.unlimited }

    /// Consumes a send-once right for the send about to be made; throws `.invalidPort` when it
    /// was consumed already. Any thread; one compare-and-exchange.
    @inline(never)
    func consumeSendOnce() throws(PortError) {
        let (exchanged, _) = sendOnceState.compareExchange(expected: SendOnce.unused, desired: SendOnce.consumed,
                                                           ordering: .acquiringAndReleasing)
        guard exchanged else { throw .invalidPort }
    }
}

import Synchronization

/// Send-once rights (§3.50): the reply port of a request takes one message, as a Mach
/// send-once right does. The right is consumed by the first send, not by the delivery, so a
/// responder that sends a second reply — before or after the first was delivered — is told
/// `.invalidPort` instead of being told a message was sent that would only be discarded.
///
/// Across processes the frame that brings a reply port says it is send-once (flag SEND_ONCE,
/// `Protocols/port-message-frame.md` §3.1), its proxy is made send-once, and closes once it has
/// sent: the requester's connection ends with its reply. A send that fails (its deadline passed,
/// the task was cancelled) sent nothing and gives the right back, as `MACH_SEND_TIMED_OUT` does.
/// A send-once proxy sent on as a reply port stays send-once in the next process; sent as a
/// PORT component it arrives as an ordinary send right — the requester still takes one reply.
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

    /// A send that consumed the right sent nothing: gives the right back. Any thread; an atomic store.
    @inline(never)
    func sendOnceNotSent() {
        sendOnceState.store(SendOnce.unused, ordering: .releasing)
    }

    /// A send-once proxy has sent its one message: closes it, so the requester's connection ends
    /// with the reply instead of when this process drops the proxy. Any thread.
    @inline(never)
    func sentThroughSendOnceProxy() {
        invalidate()
    }
}

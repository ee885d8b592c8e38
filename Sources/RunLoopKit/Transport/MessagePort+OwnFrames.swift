#if canImport(Glibc)
import Glibc
#endif

/// Frames whose fate depends on this process rather than on their sender: its own frames
/// coming back over a connection another process made (§3.60), and frames whose descriptors
/// this process had no room for (§3.57).
extension MessagePort {
    /// Marks a proxy whose frames reach one of this process's listeners' connections, so that
    /// they are known as this process's own when they come back (`OwnReturns`). Free while this
    /// process publishes no name; otherwise one getpeername(2).
    func markIfReturningHere(_ socket: SeqPacketSocket) {
        if OwnReturns.returnsHere(socket) { proxyCounters?.returnsHere.store(true, ordering: .relaxed) }
    }

    /// A frame whose descriptors the kernel could not install (this process had no descriptor
    /// left; the kernel closed the rest): not the sender's fault, so the sender keeps its
    /// connection. The message is counted as sent and discarded, and reported as
    /// `.resourceExhausted` with who sent it. The caller has closed what was installed. Loop thread.
    func discardForExhaustion(sender: Sender?, on connection: PortConnection) {
        lock.withLock {
            state.statistics.sent &+= 1
            state.statistics.discarded &+= 1
        }
        reportTransportError(TransportReport(error: .resourceExhausted(errno: EMFILE), sender: sender,
                                             connector: connection.named?.connector))
    }

    /// `report`, about a frame on `connection`, unless the throttle of the name the connection
    /// was made through leaves it out: a peer that keeps connecting and sending what is refused
    /// is rate-limited as one that keeps failing its handshake. Loop thread; a lock.
    func throttled(_ report: TransportReport, on connection: PortConnection) -> TransportReport? {
        guard connection.named != nil, let throttle = lock.withLock({ state.publication?.reports }) else { return report }
        return throttle.admit(report)
    }
}

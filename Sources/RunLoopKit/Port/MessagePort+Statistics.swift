import Synchronization

extension MessagePort {
    /// A port's counters since it was created: cheap enough to stay on (what a sender adds is
    /// its position in the queue, which it claims anyway; the receiver counts once per batch,
    /// under the lock it takes anyway), read whole with one lock acquisition.
    ///
    /// For a local port, a message is *sent* when the port accepts it (queued, or handed
    /// straight to a waiting receiver), whether it came from this process or over a send right;
    /// *delivered* when it reached the handler, the delegate or the `messages()` consumer;
    /// *discarded* when invalidation dropped it, or when it came from another process with port
    /// components this process had no descriptor left for (§3.57). So at any quiet moment
    /// `sent == delivered + discarded + queuedCount`. For a proxy (a send right to another
    /// process's port), *sent* counts frames written to the socket and the other counters stay 0
    /// but `sendersBlocked`.
    public struct Statistics: Sendable, Hashable, CustomStringConvertible {
        /// Messages the port accepted (a proxy: frames it wrote).
        public var sent: UInt64 = 0
        /// Messages given to the handler, delegate or `messages()` consumer.
        public var delivered: UInt64 = 0
        /// Messages dropped because the port was invalidated, or because this process had no
        /// descriptor left for a frame's port components; `discardedCount` is the same figure.
        public var discarded: UInt64 = 0
        /// The most messages ever queued at once (at most `queueLimit`), as each sender saw the
        /// queue once its message had joined it.
        public var queueHighWater: Int = 0
        /// Sends that had to wait for room: a synchronous sender that blocked, an async sender
        /// that suspended (each send counted once, however long it waited).
        public var sendersBlocked: UInt64 = 0

        /// Creates zeroed statistics. Any thread; free.
        public init() {}

        /// One line with every counter. Any thread.
        public var description: String {
            "sent \(sent), delivered \(delivered), discarded \(discarded), queue high water \(queueHighWater), senders blocked \(sendersBlocked)"
        }

    }

    /// The port's counters. Any thread; one lock acquisition (a proxy: two atomic loads).
    public var statistics: Statistics {
        if let proxyCounters {
            var statistics = Statistics()
            statistics.sent = proxyCounters.sent.load(ordering: .relaxed)
            statistics.sendersBlocked = proxyCounters.sendersBlocked.load(ordering: .relaxed)
            return statistics
        }
        return lock.withLock {
            var statistics = state.statistics
            statistics.sent &+= inbox.accepted
            statistics.queueHighWater = inbox.highWater
            return statistics
        }
    }
}

/// A proxy's counters: its sends take no lock, so they count with atomics.
final class ProxyCounters: Sendable {
    let sent = Atomic<UInt64>(0)
    let sendersBlocked = Atomic<UInt64>(0)
    /// The proxy's frames reach a listener of this process (`OwnReturns`, §3.60).
    let returnsHere = Atomic<Bool>(false)
}

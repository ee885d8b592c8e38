#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// One shard: a resident thread that owns one part of the keyspace (the keys whose hash falls
/// to it) and nothing else. Its loop holds two items: the inbox port, whose handler runs each
/// batch of requests from the network thread and answers with one batch of replies through
/// the message's reply port, and the expiry timer, set to the next key deadline (and to the
/// distant future when no key has one, so an idle shard sleeps without waking).
///
/// The keyspace is touched only on the shard's thread (every callout of its loop runs there),
/// which is what makes the class safe to share: the handle is used by the network thread only
/// to reach `inbox`.
final class Shard: @unchecked Sendable {
    let index: Int
    let thread: ResidentThread
    /// Requests from the network thread. Its limit is never reached: the network thread keeps
    /// fewer batches than that in flight to each shard (`NetworkServer.maxBatchesInFlight`).
    let inbox: MessagePort
    // Shard thread only, from here on (written by `init` before the loop holds an item), so
    // they skip the runtime's exclusivity checks, which would only repeat that.
    @exclusivity(unchecked) private var expiryTimer: RunLoopTimer!
    @exclusivity(unchecked) private var keyspace = Keyspace()
    @exclusivity(unchecked) private var arguments: [UnsafeRawBufferPointer] = []
    /// The deadline the timer is set for (nil: the distant future).
    @exclusivity(unchecked) private var armedFor: Int64?

    /// Keys whose deadline passed that one timer firing removes, at most, before it lets the
    /// loop serve requests again (and fires again in the next pass).
    static let expiryBudget = 4096
    private static let distantFuture = ContinuousClock.now + .seconds(Int64.max)

    init(index: Int) throws(PortError) {
        self.index = index
        inbox = try MessagePort(queueLimit: 1024)
        thread = ResidentThread(name: "kv-shard-\(index)")
        // Repeating, so that it stays valid after firing: every firing sets its next date itself
        // (a handler's own date wins over the interval). Late by up to 10 ms: lets one wake-up
        // reclaim keys that expire close together; expired keys are gone for every command at
        // once anyway (`Keyspace.lookup`).
        expiryTimer = RunLoopTimer(fireAt: Self.distantFuture, interval: .seconds(100 * 365 * 86_400),
                                   tolerance: .milliseconds(10)) { [unowned self] _ in
            removeExpiredKeys()
        }
        inbox.setHandler { [unowned self] message in serve(message) }
        thread.runLoop.add(expiryTimer, forMode: .default)
        thread.runLoop.add(inbox, forMode: .default)
    }

    /// Stops the thread (waiting for it) and closes the inbox.
    func stop() {
        thread.stop()
        inbox.invalidate()
        expiryTimer.invalidate()
    }

    // MARK: - Shard thread

    private func serve(_ message: MessagePort.Message) {
        guard message.msgid == ShardBatch.requests, let batch = message.data, let replyPort = message.replyPort else {
            return log("shard \(index): unexpected message \(message.msgid) dropped")
        }
        let now = unixMilliseconds()
        var replies = ByteBuffer(capacity: 256)
        batch.withUnsafeBytes { bytes in
            var reader = RequestReader(bytes)
            while let (tag, command, isPart) = reader.next(arguments: &arguments) {
                let lengthAt = replies.beginReply(tag, isPart: isPart)
                keyspace.execute(command, arguments, isPart: isPart, now: now, into: &replies)
                replies.finishReply(lengthAt: lengthAt)
            }
        }
        arguments.removeAll(keepingCapacity: true)
        do {
            // Never waits: the reply port holds as many batches as can be in flight.
            try replyPort.send(msgid: ShardBatch.replies + UInt32(index), components: [.data(replies.takeData())],
                               timeout: .seconds(5))
        } catch {
            log("shard \(index): replies dropped: \(error)")
        }
        armExpiryTimer()
    }

    private func removeExpiredKeys() {
        let now = unixMilliseconds()
        let moreDue = keyspace.removeExpired(now: now, limit: Self.expiryBudget)
        armedFor = nil
        if moreDue {
            // Come back in the next pass, after the requests that arrived meanwhile.
            expiryTimer.fireDate = .now
            armedFor = now
        } else {
            armExpiryTimer()
        }
    }

    /// Sets the timer to the keyspace's next deadline when that changed.
    private func armExpiryTimer() {
        let next = keyspace.nextExpiry
        guard next != armedFor else { return }
        armedFor = next
        if let next {
            expiryTimer.fireDate = .now + .milliseconds(max(next - unixMilliseconds(), 0))
        } else {
            expiryTimer.fireDate = Self.distantFuture
        }
    }
}

/// The time as Redis keeps it for expiry: Unix milliseconds (CLOCK_REALTIME).
func unixMilliseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
}

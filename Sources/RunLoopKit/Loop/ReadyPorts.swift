import Synchronization

/// One loop's ready list of ports: the ports that have messages to deliver (or frames to read
/// into room), so that a pass costs nothing for the ports that have none, however many the
/// mode holds. The same idea as epoll's ready list, kept in memory because the senders are
/// in-process.
///
/// A port pushes itself when it goes from "nothing for the loop" to "something" (the start of
/// a burst, a receiver set on queued messages, room made for parked frames); the loop takes
/// the pushes, services the ports of the mode it runs, and keeps the ports that still have
/// messages (a batch cut short by the budget) and those of modes it is not running. So a port
/// with messages is always either pushed or kept, and found by the next pass of a mode that
/// holds it.
///
/// `push` from any thread: a lock and an atomic exchange. The rest on the loop's thread only.
final class ReadyPorts: Sendable {
    private let inbox = Locked(RingBuffer<MessagePort>())
    /// Set by pushes the loop has not taken yet; the first push after the loop looked rings it.
    private let pending = Atomic<Bool>(false)
    /// Ports taken or kept, not yet serviced, in the order they became ready. Loop thread only.
    private let kept = LoopThreadOnly(RingBuffer<MessagePort>())

    /// Adds `port`; true when the loop must be rung (the first push since it last took them).
    /// Any thread.
    func push(_ port: MessagePort) -> Bool {
        inbox.withLock { $0.append(port) }
        return !pending.exchange(true, ordering: .sequentiallyConsistent)
    }

    /// Whether pushes wait to be taken. Sequentially consistent, because a loop going to sleep
    /// relies on it against `push` (it publishes that it sleeps, then looks). Any thread.
    var isPending: Bool { pending.load(ordering: .sequentiallyConsistent) }

    /// Keeps a port that was serviced and still has messages. Loop thread only.
    func keep(_ port: MessagePort) {
        kept.value.append(port)
    }

    /// Appends to `ready` the ports of `items` that have messages, in the order they became
    /// ready. Ports of other modes stay kept; ports that left the loop, or have nothing left,
    /// are dropped (a port that gets messages again pushes itself again). Loop thread only;
    /// O(ports pushed or kept), nothing for idle ports.
    func collect(for items: ItemSnapshot, of loop: ThreadRunLoop, into ready: RingBuffer<Source1Event>) {
        if pending.load(ordering: .relaxed) {
            // Cleared before taking: a push after the take sets it again and is taken next time.
            pending.store(false, ordering: .sequentiallyConsistent)
            if kept.value.isEmpty {
                // The usual case: the pushes become the list, by swapping buffers.
                inbox.withLock { swap(&$0, &kept.value) }
            } else {
                inbox.withLock { pushed in
                    while let port = pushed.popFirst() { kept.value.append(port) }
                }
            }
        }
        for _ in 0..<kept.value.count {
            let port = kept.value.popFirst()!
            if items.holds(port) {
                if port.hasDeliverableMessages { ready.append(.port(port)) }
            } else if port.isValid && port.isReceived(by: loop) {
                kept.value.append(port)
            }
        }
    }
}

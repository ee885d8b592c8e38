import Synchronization

/// The Swift rings' queue (the "Swift Data ring" and "Swift [Component] ring" references): the
/// C ring + eventfd peer's algorithm — a bounded single-producer single-consumer ring, a Dekker
/// handshake before each sleep — written in Swift for any element, so that the two rings differ
/// only in what each slot carries.
///
/// `@unchecked Sendable`: each slot is written by the producer before it publishes `tail`
/// past it and read by the consumer before it publishes `head` past it (acquire/release).
final class SwiftRing<Element: Sendable>: @unchecked Sendable {
    private let capacity: Int
    private let slots: UnsafeMutablePointer<Element?>
    private let head = Atomic<Int>(0)
    private let tail = Atomic<Int>(0)
    private let consumerSleeping = Atomic<Bool>(false)
    private let producerSleeping = Atomic<Bool>(false)
    private let finished = Atomic<Bool>(false)
    private let consumerWake = KernelEvent()
    private let producerWake = KernelEvent()
    /// The producer's own count of what it published (producer thread only).
    private var produced = 0

    init(capacity: Int) {
        self.capacity = capacity
        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: nil, count: capacity)
    }

    deinit {
        slots.deinitialize(count: capacity)
        slots.deallocate()
    }

    /// Producer thread: publishes one payload, sleeping while the ring is full.
    func produce(_ payload: Element) {
        while produced - head.load(ordering: .acquiring) == capacity {
            producerSleeping.store(true, ordering: .sequentiallyConsistent)
            if produced - head.load(ordering: .sequentiallyConsistent) == capacity { producerWake.wait() }
            producerSleeping.store(false, ordering: .relaxed)
        }
        slots[produced % capacity] = payload
        produced += 1
        tail.store(produced, ordering: .sequentiallyConsistent)
        if consumerSleeping.load(ordering: .sequentiallyConsistent)
            && consumerSleeping.exchange(false, ordering: .sequentiallyConsistent) {
            consumerWake.signal()
        }
    }

    /// Producer thread, after the last payload: lets the consumer leave once it drained.
    func finish() {
        finished.store(true, ordering: .sequentiallyConsistent)
        consumerSleeping.store(false, ordering: .sequentiallyConsistent)
        consumerWake.signal()
    }

    /// Consumer thread: hands each payload to `body` in order until `finish()` and drained.
    func consume(_ body: (Element) -> Void) {
        var next = 0
        while true {
            var end = tail.load(ordering: .acquiring)
            while next == end {
                if finished.load(ordering: .sequentiallyConsistent) && next == tail.load(ordering: .acquiring) { return }
                consumerSleeping.store(true, ordering: .sequentiallyConsistent)
                end = tail.load(ordering: .sequentiallyConsistent)
                if next == end && !finished.load(ordering: .sequentiallyConsistent) { consumerWake.wait() }
                consumerSleeping.store(false, ordering: .relaxed)
                end = tail.load(ordering: .acquiring)
            }
            while next != end {
                let payload = slots[next % capacity].take()!
                body(payload)
                next += 1
            }
            head.store(next, ordering: .sequentiallyConsistent)
            if producerSleeping.load(ordering: .sequentiallyConsistent)
                && producerSleeping.exchange(false, ordering: .sequentiallyConsistent) {
                producerWake.signal()
            }
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// A local port's queue: a ring of slots that any number of senders fill without a lock, and
/// that one receiver at a time empties (Dmitry Vyukov's bounded queue, with one consumer).
///
/// Each slot holds a message and a stamp: the lap (a position less its index in the ring) whose
/// position the slot is free for. A sender claims the position at `tail` whose slot is stamped
/// with its lap (a compare-and-exchange of `tail`), builds its message in the slot and stamps it
/// `lap + 1` (published); the receiver moves a published message out and stamps the slot
/// `lap + capacity`, free for the next lap. So a sender never waits for another sender, and a
/// sender preempted between its claim and its publication delays only the receiver, which stops
/// at that slot. A fresh ring's stamps are all zero (lap 0), so it needs no initialising: a large
/// ring's pages are touched only as positions come round to them.
///
/// Two positions bound the senders. `limit` (the port's `queueLimit`) counts the messages not
/// yet *taken*: the receiver takes everything queued (up to its batch) by moving `taken`, one
/// store, and delivers the taken messages straight from their slots afterwards, so senders have
/// room for a whole queue more while a batch is delivered, as when the queue was a locked buffer
/// swapped for an empty one. The ring therefore has `limit` slots plus one batch's, rounded up to
/// a power of two; it is allocated by the first message (a port nobody sends to holds none).
///
/// The receiver asks to be told of the next message by marking the slot at its head (`arm()`):
/// the sender that publishes that slot exchanges the stamp, sees the mark, and tells the loop.
/// Exchanging rather than storing the stamp is what lets a receiver that stops at a claimed but
/// unpublished slot be sure the publication will be reported.
///
/// Thread rules: `claim`, `slot(at:)`, `publish` and the counts from any thread; the
/// receiver's side (`take`, `takeHead`, `arm`, `head`) by one thread at a time, which the port's
/// lock hands over (`MessagePort.State.delivering`); `allocate` with the port's lock held.
final class MessageInbox: @unchecked Sendable {
    typealias Message = MessagePort.Message

    /// Messages that may wait untaken before senders must wait (the port's `queueLimit`).
    let limit: Int
    /// The most messages one take may move past `head`: the loop's batch, or the whole queue.
    private let batchLimit: Int
    /// Slots in the ring, a power of two (0 for a limit too large to have a ring).
    let capacity: Int
    private let indexMask: UInt64
    /// Set in a stamp by the receiver waiting for that slot to be published.
    private static let mark: UInt64 = 1 << 63
    /// A slot: its stamp, then its message.
    private static let messageOffset = max(MemoryLayout<Atomic<UInt64>>.stride, MemoryLayout<Message>.alignment)
    private static let slotStride = (messageOffset + MemoryLayout<Message>.size + 7) & ~7

    /// `tail`, `taken`, `highWater` and `head` each on a line of its own: `tail` changes with every
    /// message sent and `head` with every message delivered, `taken` once per batch, and a sender
    /// reads `taken` and this object's other fields with every message.
    private let positions: UnsafeMutableRawPointer
    private var tail: UnsafeMutablePointer<Atomic<UInt64>> { positions.assumingMemoryBound(to: Atomic<UInt64>.self) }
    private var takenPosition: UnsafeMutablePointer<Atomic<UInt64>> {
        (positions + Self.lineSpacing).assumingMemoryBound(to: Atomic<UInt64>.self)
    }
    private var highWaterCount: UnsafeMutablePointer<Atomic<Int>> {
        (positions + 2 * Self.lineSpacing).assumingMemoryBound(to: Atomic<Int>.self)
    }
    private var headPosition: UnsafeMutablePointer<UInt64> {
        (positions + 3 * Self.lineSpacing).assumingMemoryBound(to: UInt64.self)
    }
    /// Two cache lines: adjacent-line prefetchers fetch lines in pairs.
    private static let lineSpacing = 128
    /// The ring, nil until the first message.
    private let ring = Atomic<UnsafeMutableRawPointer?>(nil)
    /// The ring's allocation, which `ring` is aligned within. Set with the port's lock held.
    @exclusivity(unchecked) private var allocation: UnsafeMutableRawPointer?
    /// The next position to deliver. Receiver only.
    private(set) var head: UInt64 {
        get { headPosition.pointee }
        set { headPosition.pointee = newValue }
    }

    init(limit: Int, batchLimit: Int) {
        self.limit = limit
        self.batchLimit = min(limit, batchLimit)
        let (slots, overflow) = limit.addingReportingOverflow(self.batchLimit)
        capacity = overflow || slots > 1 << 40 ? 0 : 1 << (Int.bitWidth - (slots - 1).leadingZeroBitCount)
        indexMask = UInt64(truncatingIfNeeded: capacity - 1)
        positions = .allocate(byteCount: 4 * Self.lineSpacing, alignment: Self.lineSpacing)
        positions.bindMemory(to: Atomic<UInt64>.self, capacity: 1).initialize(to: Atomic(0))
        (positions + Self.lineSpacing).bindMemory(to: Atomic<UInt64>.self, capacity: 1).initialize(to: Atomic(0))
        (positions + 2 * Self.lineSpacing).bindMemory(to: Atomic<Int>.self, capacity: 1).initialize(to: Atomic(0))
        (positions + 3 * Self.lineSpacing).bindMemory(to: UInt64.self, capacity: 1).initialize(to: 0)
    }

    deinit {
        if let slots = ring.load(ordering: .acquiring) {
            // No sender is left: every claimed slot was published.
            var position = head
            let end = tail.pointee.load(ordering: .acquiring)
            while position != end {
                message(slots, position).deinitialize(count: 1)
                position &+= 1
            }
        }
        free(allocation)
        positions.deallocate()
    }

    // MARK: - Slots

    /// The lap of `position`: what its slot's stamp says while the slot is free for it.
    @inline(__always)
    private func lap(_ position: UInt64) -> UInt64 { position & ~indexMask }

    @inline(__always)
    private func stamp(_ slots: UnsafeMutableRawPointer, _ position: UInt64) -> UnsafeMutablePointer<Atomic<UInt64>> {
        (slots + Int(truncatingIfNeeded: position & indexMask) &* Self.slotStride).assumingMemoryBound(to: Atomic<UInt64>.self)
    }

    @inline(__always)
    private func message(_ slots: UnsafeMutableRawPointer, _ position: UInt64) -> UnsafeMutablePointer<Message> {
        (slots + (Int(truncatingIfNeeded: position & indexMask) &* Self.slotStride &+ Self.messageOffset))
            .assumingMemoryBound(to: Message.self)
    }

    /// Whether the ring exists yet. Any thread.
    var isAllocated: Bool { ring.load(ordering: .acquiring) != nil }

    /// Makes the ring, armed (its first publication is reported); false when memory for it cannot
    /// be had. Port's lock held, so only one sender allocates.
    ///
    /// Zeroed memory is a ring whose every slot is free for lap 0: calloc(3) takes a large one
    /// straight from the kernel's zeroed pages, which nothing touches until a position reaches
    /// them. Each slot starts on a cache line of its own (a slot is 64 bytes).
    func allocate() -> Bool {
        guard !isAllocated else { return true }
        guard capacity > 0, let allocation = calloc(1, capacity * Self.slotStride + 63) else { return false }
        self.allocation = allocation
        let slots = allocation.alignedUp(toMultipleOf: 64)
        for index in 0..<capacity {
            let slot = slots + index &* Self.slotStride
            slot.bindMemory(to: Atomic<UInt64>.self, capacity: 1)
            (slot + Self.messageOffset).bindMemory(to: Message.self, capacity: 1)
        }
        stamp(slots, 0).pointee.store(Self.mark, ordering: .relaxed)
        ring.store(slots, ordering: .releasing)
        return true
    }

    // MARK: - Senders

    /// Why a sender could not claim a slot.
    enum Refusal: Error {
        /// `limit` messages wait untaken.
        case full
        /// No message was ever sent: the ring does not exist yet.
        case unallocated
    }

    /// Claims the next position for a message, or says why there is none. Any thread; lock-free:
    /// a compare-and-exchange, retried only when another sender claimed the position first.
    ///
    /// The ring never runs out of slots before the queue reaches `limit`: a take moves `taken` at
    /// most one batch past `head`, so the positions claimed lie within `limit` plus one batch of
    /// `head`, inside one lap. The acquiring load of `taken` makes that visible: the take that
    /// stored it came after the receiver freed every slot a position below `taken + limit` reuses.
    @inline(__always)
    func claim() -> Result<UInt64, Refusal> {
        guard let slots = ring.load(ordering: .acquiring) else { return .failure(.unallocated) }
        var position = tail.pointee.load(ordering: .relaxed)
        while true {
            // Signed: `taken` may have passed a stale `position`, which then has room.
            guard Int64(bitPattern: position &- takenPosition.pointee.load(ordering: .acquiring)) < limit else {
                return .failure(.full)
            }
            let stamp = stamp(slots, position).pointee.load(ordering: .acquiring) & ~Self.mark
            if stamp == lap(position) {
                let (claimed, current) = tail.pointee.weakCompareExchange(
                    expected: position, desired: position &+ 1, successOrdering: .relaxed, failureOrdering: .relaxed)
                if claimed { return .success(position) }
                position = current
            } else {
                // Claimed (and maybe published) by another sender since `position` was read.
                position = tail.pointee.load(ordering: .relaxed)
            }
        }
    }

    /// Where the message of a claimed position is built. Claiming thread only.
    @inline(__always)
    func slot(at position: UInt64) -> UnsafeMutablePointer<Message> {
        message(ring.load(ordering: .relaxed).unsafelyUnwrapped, position)
    }

    /// Publishes the message built at `position`; true when the receiver asked to be told.
    /// Sequentially consistent, so that a sender's next look at the port's validity cannot be
    /// ordered before it (see `MessagePort.didPublish`). Claiming thread only.
    @inline(__always)
    func publish(_ position: UInt64) -> Bool {
        let slots = ring.load(ordering: .relaxed).unsafelyUnwrapped
        let previous = stamp(slots, position).pointee.exchange(lap(position) &+ 1, ordering: .sequentiallyConsistent)
        if highWaterCount.pointee.load(ordering: .relaxed) < limit { raiseHighWater(upTo: position) }
        return previous & Self.mark != 0
    }

    /// Records the queue's length after the message at `position` joined it.
    @inline(never)
    private func raiseHighWater(upTo position: UInt64) {
        let queued = Int(truncatingIfNeeded: Int64(bitPattern: position &+ 1 &- takenPosition.pointee.load(ordering: .relaxed)))
        var current = highWaterCount.pointee.load(ordering: .relaxed)
        while queued > current {
            let (raised, seen) = highWaterCount.pointee.weakCompareExchange(
                expected: current, desired: queued, successOrdering: .relaxed, failureOrdering: .relaxed)
            if raised { return }
            current = seen
        }
    }

    // MARK: - Counts (any thread)

    /// Messages claimed and not yet taken (those being built included).
    var count: Int {
        let taken = takenPosition.pointee.load(ordering: .relaxed)
        return max(0, Int(truncatingIfNeeded: Int64(bitPattern: tail.pointee.load(ordering: .relaxed) &- taken)))
    }

    /// Every position ever claimed: the messages this queue accepted.
    var accepted: UInt64 { tail.pointee.load(ordering: .relaxed) }

    /// The most messages ever waiting untaken at once.
    var highWater: Int { highWaterCount.pointee.load(ordering: .relaxed) }

    // MARK: - Receiver

    /// Takes everything queued, up to `limit` past `head`: the room it held is the senders' again.
    /// Returns the end of what is taken and not yet delivered. Receiver, port's lock held.
    func take(upTo limit: Int) -> UInt64 {
        var taken = takenPosition.pointee.load(ordering: .relaxed)
        let end = min(tail.pointee.load(ordering: .acquiring), head &+ UInt64(min(limit, batchLimit)))
        if end > taken {
            taken = end
            takenPosition.pointee.store(taken, ordering: .releasing)
        }
        return min(taken, head &+ UInt64(limit))
    }

    /// Makes the messages taken and not delivered (a batch that ended early) queued again, first
    /// in line: counted in `count`, and against `limit` for senders. Receiver, port's lock held.
    func requeueUndelivered() {
        if takenPosition.pointee.load(ordering: .relaxed) > head {
            takenPosition.pointee.store(head, ordering: .releasing)
        }
    }

    /// Whether the message at `head` is published. Receiver.
    var headIsPublished: Bool {
        guard let slots = ring.load(ordering: .acquiring) else { return false }
        return stamp(slots, head).pointee.load(ordering: .acquiring) == lap(head) &+ 1
    }

    /// Whether every message claimed was delivered. Receiver.
    var isDrained: Bool { tail.pointee.load(ordering: .acquiring) == head }

    /// Whether more than the message at `head` is claimed. Receiver.
    var hasMoreThanHead: Bool { tail.pointee.load(ordering: .relaxed) &- head > 1 }

    /// The message at `head`, moved out of its slot (which is free for the next lap), if it is
    /// published and taken. Receiver; a couple of loads and stores.
    @inline(__always)
    func takeHead(before end: UInt64) -> Message? {
        let position = head
        guard position < end, let slots = ring.load(ordering: .relaxed) else { return nil }
        let stamp = stamp(slots, position)
        guard stamp.pointee.load(ordering: .acquiring) == lap(position) &+ 1 else { return nil }
        let taken = message(slots, position).move()
        stamp.pointee.store(lap(position) &+ UInt64(capacity), ordering: .releasing)
        head = position &+ 1
        return taken
    }

    /// The metadata of the message at `head`, if it is published and before `end`, read in place.
    /// Receiver; a couple of loads.
    func headMetadata(before end: UInt64) -> MessageMetadata? {
        let position = head
        guard position < end, let slots = ring.load(ordering: .relaxed),
              stamp(slots, position).pointee.load(ordering: .acquiring) == lap(position) &+ 1 else { return nil }
        return message(slots, position).pointee.metadata
    }

    /// Takes (one) and moves out the message at `head`, if it is published. Receiver, port's lock held.
    func takeOne() -> Message? {
        takeHead(before: take(upTo: 1))
    }

    /// Discards every published message from `head` on, taking them; returns how many. A slot
    /// still being built stops it: its sender discards from there (`MessagePort.didPublish`).
    /// Receiver, port's lock held.
    func discardPublished() -> Int {
        guard let slots = ring.load(ordering: .acquiring) else { return 0 }
        var discarded = 0
        // Sequentially consistent, against a sender that publishes and then looks at validity.
        while stamp(slots, head).pointee.load(ordering: .sequentiallyConsistent) == lap(head) &+ 1 {
            message(slots, head).deinitialize(count: 1)
            stamp(slots, head).pointee.store(lap(head) &+ UInt64(capacity), ordering: .releasing)
            head &+= 1
            discarded += 1
        }
        if head > takenPosition.pointee.load(ordering: .relaxed) { takenPosition.pointee.store(head, ordering: .releasing) }
        return discarded
    }

    /// Asks the sender of the message at `head` to report its publication. True when armed (or
    /// the ring does not exist yet, which is armed from the start); false when the message is
    /// already published, to be taken. Receiver, port's lock held.
    func arm() -> Bool {
        guard let slots = ring.load(ordering: .acquiring) else { return true }
        let lap = lap(head)
        let stamp = stamp(slots, head)
        switch stamp.pointee.load(ordering: .acquiring) {
        case lap | Self.mark: return true
        case lap &+ 1: return false
        default:
            // Free, or claimed and being built: the sender that publishes it will see the mark.
            return stamp.pointee.compareExchange(expected: lap, desired: lap | Self.mark,
                                                 ordering: .sequentiallyConsistent).exchanged
        }
    }
}

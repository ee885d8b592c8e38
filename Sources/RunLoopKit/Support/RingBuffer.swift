/// A growable FIFO ring of `Element`s with amortised O(1) push and pop and no allocation in
/// the steady state (capacity only grows, in powers of two). Not thread-safe: its owner
/// guards it with a lock.
final class RingBuffer<Element> {
    // Always used under its owner's lock; the runtime exclusivity check would only repeat that.
    @exclusivity(unchecked) private var storage: UnsafeMutablePointer<Element>
    @exclusivity(unchecked) private var capacity: Int
    @exclusivity(unchecked) private var head = 0
    @exclusivity(unchecked) private(set) var count = 0

    init(initialCapacity: Int = 16) {
        capacity = max(1, initialCapacity).nextPowerOfTwo
        storage = .allocate(capacity: capacity)
    }

    deinit {
        removeAll()
        storage.deallocate()
    }

    var isEmpty: Bool { count == 0 }

    // Inlined so that callers reaching the buffer through another object need not retain it
    // around the call.
    @inline(__always)
    func append(_ element: consuming Element) {
        if count == capacity { grow() }
        (storage + ((head + count) & (capacity - 1))).initialize(to: consume element)
        count += 1
    }

    @inline(__always)
    func popFirst() -> Element? {
        guard count > 0 else { return nil }
        let element = (storage + head).move()
        head = (head + 1) & (capacity - 1)
        count -= 1
        return element
    }

    /// Exchanges the contents of two buffers in O(1): taking a whole queue costs no copies.
    func swapContents(with other: RingBuffer<Element>) {
        swap(&storage, &other.storage)
        swap(&capacity, &other.capacity)
        swap(&head, &other.head)
        swap(&count, &other.count)
    }

    func removeAll() {
        while popFirst() != nil {}
        head = 0
    }

    /// Removes the elements matching `predicate`, keeping the others in order.
    func removeAll(where predicate: (Element) -> Bool) {
        for _ in 0..<count {
            let element = popFirst()!
            if !predicate(element) { append(element) }
        }
    }

    func count(where predicate: (Element) -> Bool) -> Int {
        var matching = 0
        for index in 0..<count where predicate(storage[(head + index) & (capacity - 1)]) { matching += 1 }
        return matching
    }

    func contains(where predicate: (Element) -> Bool) -> Bool {
        for index in 0..<count where predicate(storage[(head + index) & (capacity - 1)]) { return true }
        return false
    }

    @inline(never)
    private func grow() {
        let newCapacity = capacity * 2
        let newStorage = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
        for i in 0..<count {
            (newStorage + i).moveInitialize(from: storage + ((head + i) & (capacity - 1)), count: 1)
        }
        storage.deallocate()
        storage = newStorage
        capacity = newCapacity
        head = 0
    }
}

extension Int {
    fileprivate var nextPowerOfTwo: Int {
        self <= 1 ? 1 : 1 << (Int.bitWidth - (self - 1).leadingZeroBitCount)
    }
}

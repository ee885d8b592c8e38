/// The items of one mode (or of the common pseudo-mode), one array per kind.
///
/// Membership is hashed by object identity, so `insert`, `remove` and `contains` cost O(1)
/// (amortised) however many items there are: daemons hold tens of thousands of timers or
/// sources and add and remove them all the time. Each array holds exactly its kind's items,
/// but in service order — Source0s, observers and fd sources ascending by `order`, ties and
/// the other kinds in insertion order (Guarantees) — only after `putInOrder()`: a removal
/// moves the last item into the gap and an insertion out of order appends. The loop thread
/// puts the set in order when it takes a snapshot after a change (O(n log n) for a kind that
/// changed, nothing for the others and nothing on a pass that finds its mode unchanged).
///
/// Guarded by the loop's state lock, like everything in `LoopState`. Write the arrays only
/// through `insert` and `remove` (they are settable for the items' `itemKind` key paths).
struct ItemSet {
    var sources: [RunLoopSource] = []
    var timers: [RunLoopTimer] = []
    var observers: [RunLoopObserver] = []
    var ports: [MessagePort] = []
    var fileDescriptorSources: [FileDescriptorSource] = []

    private struct Entry {
        /// Where the item is in its kind's array.
        var index: Int
        /// When it was inserted: the tie-break that keeps equal orders in insertion order.
        let sequence: UInt64
    }
    private var entries: [ObjectIdentifier: Entry] = [:]
    private var insertions: UInt64 = 0
    /// The kinds (by metatype) whose array is out of service order.
    private var disorderedKinds: Set<ObjectIdentifier> = []

    /// Whether a run in this mode has something to wait for (observers do not count).
    var keepsModeAlive: Bool {
        !sources.isEmpty || !timers.isEmpty || !ports.isEmpty || !fileDescriptorSources.isEmpty
    }

    /// Adds `item`; false (and nothing changes) when it is already in the set.
    mutating func insert<T: RunLoopItem>(_ item: T) -> Bool {
        let identity = ObjectIdentifier(item)
        guard entries[identity] == nil else { return false }
        let kind = T.itemKind
        insertions += 1
        entries[identity] = Entry(index: self[keyPath: kind].count, sequence: insertions)
        if let order = item.sortOrder, let last = self[keyPath: kind].last, (last.sortOrder ?? 0) > order {
            disorderedKinds.insert(ObjectIdentifier(T.self))
        }
        self[keyPath: kind].append(item)
        return true
    }

    /// Removes `item`; false when it was not in the set.
    mutating func remove<T: RunLoopItem>(_ item: T) -> Bool {
        guard let entry = entries.removeValue(forKey: ObjectIdentifier(item)) else { return false }
        let kind = T.itemKind
        let lastIndex = self[keyPath: kind].count - 1
        if entry.index != lastIndex {
            let moved = self[keyPath: kind][lastIndex]
            self[keyPath: kind][entry.index] = moved
            entries[ObjectIdentifier(moved)]?.index = entry.index
            disorderedKinds.insert(ObjectIdentifier(T.self))
        }
        self[keyPath: kind].removeLast()
        return true
    }

    func contains(_ item: AnyObject) -> Bool {
        entries[ObjectIdentifier(item)] != nil
    }

    /// Sorts the kinds that changed out of order back into service order.
    mutating func putInOrder() {
        guard !disorderedKinds.isEmpty else { return }
        sortIfDisordered(\.sources)
        sortIfDisordered(\.timers)
        sortIfDisordered(\.observers)
        sortIfDisordered(\.ports)
        sortIfDisordered(\.fileDescriptorSources)
        disorderedKinds.removeAll(keepingCapacity: true)
    }

    /// A copy in service order, for readers that hold the lock without owning the set
    /// (descriptions).
    var inServiceOrder: ItemSet {
        var copy = self
        copy.putInOrder()
        return copy
    }

    private mutating func sortIfDisordered<T: RunLoopItem>(_ kind: WritableKeyPath<ItemSet, [T]>) {
        guard disorderedKinds.contains(ObjectIdentifier(T.self)) else { return }
        var keyed = self[keyPath: kind].map { item in
            (order: item.sortOrder ?? 0, sequence: entries[ObjectIdentifier(item)]!.sequence, item: item)
        }
        keyed.sort { ($0.order, $0.sequence) < ($1.order, $1.sequence) }
        for (index, element) in keyed.enumerated() {
            entries[ObjectIdentifier(element.item)]!.index = index
        }
        self[keyPath: kind] = keyed.map(\.item)
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// A key's bytes: owned (a key stored in the table or the expiry queue, which share one
/// array), or borrowed from a request for the length of a lookup, so that finding a key
/// allocates nothing. Equal keys hash alike whichever way they hold their bytes.
struct Key: Hashable {
    private enum Storage {
        case owned([UInt8])
        case borrowed(UnsafeRawBufferPointer)
    }
    private let storage: Storage

    /// A key that keeps a copy of `bytes`.
    init(copying bytes: UnsafeRawBufferPointer) {
        storage = .owned(Array(bytes))
    }

    /// A key for a lookup only: valid while `bytes` is, never stored.
    init(borrowing bytes: UnsafeRawBufferPointer) {
        storage = .borrowed(bytes)
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        switch storage {
        case .owned(let array): array.withUnsafeBytes(body)
        case .borrowed(let bytes): body(bytes)
        }
    }

    static func == (lhs: Key, rhs: Key) -> Bool {
        lhs.withBytes { left in
            rhs.withBytes { right in
                left.count == right.count && (left.count == 0 || memcmp(left.baseAddress!, right.baseAddress!, left.count) == 0)
            }
        }
    }

    func hash(into hasher: inout Hasher) {
        withBytes { hasher.combine(bytes: $0) }
    }
}

/// One shard's part of the keyspace: string values with optional expiry times, as a Redis
/// database holds them. Keys whose time has come are gone for every command (`lookup` removes
/// them, as Redis's `expireIfNeeded` does) and are reclaimed in the background by the shard's
/// expiry timer (`removeExpired`), which `nextExpiry` tells when to fire.
///
/// Times are Unix milliseconds (CLOCK_REALTIME), as in Redis: a key's deadline is absolute
/// (`SET … PXAT`), and what TTL reports is that deadline minus the time of the command.
/// Shard thread only.
struct Keyspace {
    struct Entry {
        var value: [UInt8]
        /// Unix milliseconds; 0 for a key that never expires (a deadline in the past is
        /// removed, never stored as 0).
        var expiresAt: Int64
    }

    private var table: [Key: Entry] = [:]
    private var expiries = ExpiryQueue()
    /// How many entries have a deadline, so that the queue, which keeps stale deadlines until
    /// they come up, can be rebuilt when it holds too many of them.
    private var expiring = 0

    var count: Int { table.count }

    typealias Index = Dictionary<Key, Entry>.Index

    /// The key's entry, unless it is absent or expired (an expired one is removed).
    mutating func lookup(_ key: UnsafeRawBufferPointer, now: Int64) -> Index? {
        guard let index = table.index(forKey: Key(borrowing: key)) else { return nil }
        let deadline = table.values[index].expiresAt
        if deadline != 0 && deadline <= now {
            remove(at: index)
            return nil
        }
        return index
    }

    /// Calls `body` with the value's bytes.
    func withValue<R>(at index: Index, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        table.values[index].value.withUnsafeBytes(body)
    }

    func expiresAt(_ index: Index) -> Int64 {
        table.values[index].expiresAt
    }

    /// Replaces the value of an existing key, in its own memory when it has room (so that
    /// rewriting the same keys keeps the memory flat); the deadline is dropped unless
    /// `keepingDeadline`.
    mutating func replace(at index: Index, with value: UnsafeRawBufferPointer, keepingDeadline: Bool) {
        table.values[index].value.removeAll(keepingCapacity: true)
        table.values[index].value.append(contentsOf: value)
        if !keepingDeadline { clearDeadline(at: index) }
    }

    /// Sets a new key (absent: `lookup` returned nil); returns its index.
    @discardableResult
    mutating func insert(_ key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Index {
        let owned = Key(copying: key)
        table[owned] = Entry(value: Array(value), expiresAt: 0)
        return table.index(forKey: owned)!
    }

    /// Sets `key` to `value`, new or not, without a deadline (SET, MSET).
    mutating func set(_ key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, now: Int64) {
        if let index = lookup(key, now: now) {
            replace(at: index, with: value, keepingDeadline: false)
        } else {
            insert(key, value: value)
        }
    }

    mutating func setDeadline(at index: Index, _ deadline: Int64) {
        if table.values[index].expiresAt == 0 { expiring += 1 }
        table.values[index].expiresAt = deadline
        expiries.insert(deadline, table.keys[index])
        compactExpiriesIfStale()
    }

    private mutating func clearDeadline(at index: Index) {
        guard table.values[index].expiresAt != 0 else { return }
        table.values[index].expiresAt = 0
        expiring -= 1
    }

    mutating func remove(at index: Index) {
        if table.values[index].expiresAt != 0 { expiring -= 1 }
        table.remove(at: index)
    }

    /// FLUSHALL: every key and its memory.
    mutating func removeAll() {
        table = [:]
        expiries = ExpiryQueue()
        expiring = 0
    }

    /// When the next deadline comes, if any key has one (it may be stale: the key was
    /// rewritten or removed since; the timer then finds nothing to do).
    var nextExpiry: Int64? { expiries.earliest }

    /// Removes up to `limit` keys whose deadline is at or before `now`; returns whether more
    /// deadlines are due (the caller comes back for them after other work).
    mutating func removeExpired(now: Int64, limit: Int) -> Bool {
        var examined = 0
        while examined < limit, let (deadline, key) = expiries.popDue(now: now) {
            examined += 1
            if let index = table.index(forKey: key), table.values[index].expiresAt == deadline {
                remove(at: index)
            }
        }
        return expiries.earliest.map { $0 <= now } ?? false
    }

    /// Rebuilds the expiry queue from the live deadlines once stale ones (of keys rewritten,
    /// given another deadline or removed) make up most of it: a client setting the same key
    /// with a long TTL over and over must not grow the queue without bound.
    private mutating func compactExpiriesIfStale() {
        guard expiries.count > 1024 && expiries.count > 2 * expiring else { return }
        var fresh = ExpiryQueue()
        for (key, entry) in table where entry.expiresAt != 0 {
            fresh.insert(entry.expiresAt, key)
        }
        expiries = fresh
    }
}

/// A binary min-heap of (deadline, key): the next key to expire is on top. A key may appear
/// with a deadline it no longer has; whoever pops it checks.
struct ExpiryQueue {
    private var heap: [(deadline: Int64, key: Key)] = []

    var count: Int { heap.count }
    var earliest: Int64? { heap.first?.deadline }

    mutating func insert(_ deadline: Int64, _ key: Key) {
        heap.append((deadline, key))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].deadline < heap[parent].deadline else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    /// The top entry when its deadline is at or before `now`, removed.
    mutating func popDue(now: Int64) -> (Int64, Key)? {
        guard let top = heap.first, top.deadline <= now else { return nil }
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1, right = left + 1
                var smallest = parent
                if left < heap.count && heap[left].deadline < heap[smallest].deadline { smallest = left }
                if right < heap.count && heap[right].deadline < heap[smallest].deadline { smallest = right }
                guard smallest != parent else { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return top
    }
}

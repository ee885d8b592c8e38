import Synchronization

/// One mode of one loop: its items and the epoll set the loop sleeps on while running it.
///
/// Each mode has its own epoll set holding the loop's wake-up doorbell and the mode's port
/// doorbells and fd sources, so readiness of an item of mode A cannot wake a loop sleeping
/// in mode B (DESIGN §3.10). Mutated only under the loop's state lock; `epoll` itself is
/// thread-safe and is used by the loop thread outside the lock.
final class ModeState {
    let mode: ThreadRunLoop.Mode
    let epoll: Epoll
    /// Bumped (under the lock) whenever `items` changes, so the loop thread can reuse its last
    /// snapshot without taking the lock or copying the item lists on every pass.
    private let generation = Atomic<UInt64>(0)
    /// The loop thread's last snapshot of `items`. Loop thread only.
    @exclusivity(unchecked) private var snapshot: ItemSnapshot?
    // Guarded by the loop's state lock (see the type's comment).
    @exclusivity(unchecked) var items = ItemSet()
    /// The registered Source1 descriptors, in registration order (copied into snapshots).
    @exclusivity(unchecked) private var source1List: [(token: UInt64, source: Source1)] = []

    init(mode: ThreadRunLoop.Mode, wakeDoorbell: EventFD) {
        self.mode = mode
        do {
            epoll = try Epoll()
            try epoll.add(wakeDoorbell.descriptor, interest: [.readable, .edgeTriggered], token: ThreadRunLoop.wakeToken)
        } catch {
            preconditionFailure("RunLoopKit: cannot create the epoll set for run-loop mode \(mode): \(error)")
        }
    }

    /// Inserts `item`; registers its kernel readiness when it is a Source1. False if already present.
    func insert<T: RunLoopItem>(_ item: T) -> Bool {
        guard items.insert(item) else { return false }
        for registration in item.source1Registrations { register(registration) }
        generation.add(1, ordering: .releasing)
        return true
    }

    func remove<T: RunLoopItem>(_ item: T) -> Bool {
        guard items.remove(item) else { return false }
        for registration in item.source1Registrations { unregister(registration) }
        generation.add(1, ordering: .releasing)
        return true
    }

    /// The mode's items as of now, for the loop thread: the previous snapshot when nothing
    /// changed since, otherwise a new one taken under `lock`.
    func currentItems(lock: Locked<LoopState>) -> ItemSnapshot {
        let current = generation.load(ordering: .acquiring)
        if let snapshot, snapshot.generation == current { return snapshot }
        let fresh = lock.withLock { _ in
            ItemSnapshot(items: items, source1: source1List, generation: generation.load(ordering: .relaxed))
        }
        snapshot = fresh
        return fresh
    }

    /// Whether nothing was added or removed since `snapshot` was taken. Any thread; an atomic load.
    func isCurrent(_ snapshot: ItemSnapshot) -> Bool {
        generation.load(ordering: .acquiring) == snapshot.generation
    }

    /// Forgets the snapshot when an invocation ends, so items removed meanwhile are not kept
    /// alive by a loop that may not run this mode again. Loop thread only.
    func dropSnapshot() {
        snapshot = nil
    }

    /// Adds one descriptor of a Source1 (also used when a port gains a connection after it was
    /// scheduled). Registering a descriptor twice is a no-op.
    func register(_ registration: Source1Registration) {
        guard !source1List.contains(where: { $0.token == registration.token }) else { return }
        source1List.append((registration.token, registration.source))
        generation.add(1, ordering: .releasing)
        do {
            try epoll.add(registration.descriptor, interest: registration.interest, token: registration.token)
        } catch {
            preconditionFailure("RunLoopKit: cannot watch \(registration.descriptor) in mode \(mode) (\(error)); was it closed before being added?")
        }
    }

    /// Removes one descriptor of a Source1; unregistering one that is not registered is a no-op.
    func unregister(_ registration: Source1Registration) {
        guard let index = source1List.firstIndex(where: { $0.token == registration.token }) else { return }
        source1List.remove(at: index)
        generation.add(1, ordering: .releasing)
        epoll.remove(registration.descriptor)
    }
}

/// An immutable copy of a mode's item lists, shared by the passes that see no change.
final class ItemSnapshot: Sendable {
    let sources: [RunLoopSource]
    let timers: [RunLoopTimer]
    let observers: [RunLoopObserver]
    let ports: [MessagePort]
    /// What the lists above hold, as plain values: a pass tests these, and touches a list (a
    /// retain and release each) only when it has something for the pass to do.
    let observedActivities: ThreadRunLoop.Activity
    let hasSources: Bool
    let hasTimers: Bool
    /// Whether a Source1 of the mode can be ready without the loop knowing it in memory (an fd
    /// source, a send right's connection, a proxy), so that only a poll of the epoll set finds it.
    let hasKernelOnlySources1: Bool
    /// Whether the items alone keep a run of the mode going (DESIGN §3.1).
    let keepsModeAlive: Bool
    private let source1List: [(token: UInt64, source: Source1)]
    private let source1ByToken: [UInt64: Source1]
    let generation: UInt64

    init(items: ItemSet, source1: [(token: UInt64, source: Source1)], generation: UInt64) {
        sources = items.sources
        timers = items.timers
        observers = items.observers
        ports = items.ports
        observedActivities = items.observers.reduce(into: []) { $0.formUnion($1.activities) }
        hasSources = !items.sources.isEmpty
        hasTimers = !items.timers.isEmpty
        hasKernelOnlySources1 = source1.contains { entry in
            if case .portDoorbell = entry.source { false } else { true }
        }
        keepsModeAlive = items.keepsModeAlive
        source1List = source1
        // With the few Source1s a mode usually has, a linear scan beats hashing.
        source1ByToken = source1.count > 16 ? Dictionary(source1, uniquingKeysWith: { first, _ in first }) : [:]
        self.generation = generation
    }

    /// The Source1 registered under `token`.
    func source1(for token: UInt64) -> Source1? {
        source1ByToken.isEmpty ? source1List.first { $0.token == token }?.source : source1ByToken[token]
    }
}

/// Everything about a loop that other threads may change, guarded by the loop's state lock.
struct LoopState {
    var modes: [ThreadRunLoop.Mode: ModeState] = [:]
    var commonModes: Set<ThreadRunLoop.Mode> = [.default]
    var commonItems = ItemSet()
    /// Queued `perform` blocks, in FIFO order. A ring (a reference) so that a pass takes them
    /// all by swapping it with its own empty one.
    var blocks = RingBuffer<PendingBlock>()
    /// The modes of the running invocations, innermost last.
    var modeStack: [ThreadRunLoop.Mode] = []
    /// Set when the owning thread exits: nothing queued afterwards could ever run.
    var threadExited = false
    /// The name of a `ResidentThread`'s thread, for messages about it.
    var threadName: String?

    /// "thread <tid>", with the thread's name when it has one.
    func threadLabel(_ owner: ThreadID) -> String {
        threadName.map { "\(owner) \"\($0)\"" } ?? "\(owner)"
    }

    func blockMatches(_ block: PendingBlock, _ mode: ThreadRunLoop.Mode) -> Bool {
        block.modes.contain(mode) { commonModes.contains(mode) }
    }

    func hasBlocks(for mode: ThreadRunLoop.Mode) -> Bool {
        blocks.contains { blockMatches($0, mode) }
    }

    /// Whether a run of the mode has anything to service (DESIGN §3.1).
    func modeIsAlive(_ modeState: ModeState) -> Bool {
        modeState.items.keepsModeAlive || hasBlocks(for: modeState.mode)
    }

    /// The modes whose items include `item`.
    func modes(holding item: AnyObject) -> [ModeState] {
        modes.values.filter { $0.items.contains(item) }
    }

    /// Whether `item` is still in any mode (or the common set) of this loop.
    func contains(_ item: AnyObject) -> Bool {
        commonItems.contains(item) || modes.values.contains { $0.items.contains(item) }
    }
}

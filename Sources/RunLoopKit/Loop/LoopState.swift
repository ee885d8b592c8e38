import Synchronization

/// One mode of one loop: its items and the epoll set the loop sleeps on while running it.
///
/// Each mode has its own epoll set holding the loop's wake-up doorbell and the descriptors of
/// the mode's fd sources, send rights' connections and proxies, so readiness of an item of
/// mode A cannot wake a loop sleeping in mode B (Guarantees §3.10); in-process port messages
/// reach the loop through its `ReadyPorts`, which keeps a port of mode A for mode A. Mutated only under the loop's state lock; `epoll` itself is
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
    /// What each token registered in `epoll` stands for (copied into snapshots).
    @exclusivity(unchecked) private var source1ByToken: [UInt64: Source1] = [:]
    /// How many of those there are: only a poll of the epoll set finds them ready.
    @exclusivity(unchecked) private var kernelOnlySources1 = 0
    /// The fd sources of the mode by descriptor: one epoll registration per descriptor.
    @exclusivity(unchecked) private var watches: [Int32: DescriptorWatch] = [:]
    /// How many of `watches` epoll refused (always ready).
    @exclusivity(unchecked) private var unpollableWatches = 0
    /// Whether the mode is a common mode (modes never stop being one), so that matching a block
    /// queued for the common modes costs no hash lookup. Guarded by the loop's state lock.
    @exclusivity(unchecked) var isCommon = false
    /// When the mode's timers next need the loop. Loop thread only.
    @exclusivity(unchecked) var timerSchedule = TimerSchedule()

    init(mode: ThreadRunLoop.Mode, wakeDoorbell: EventFD) {
        self.mode = mode
        do {
            epoll = try Epoll()
            try epoll.add(wakeDoorbell.descriptor, interest: [.readable, .edgeTriggered], token: ThreadRunLoop.wakeToken)
        } catch {
            preconditionFailure("RunLoopKit: cannot create the epoll set for run-loop mode \(mode): \(error)")
        }
    }

    /// Whether a block or job queued for `block.modes` runs in this mode. Under the loop's state
    /// lock; a compare, no hashing.
    @inline(__always)
    func runs(_ block: PendingBlock) -> Bool {
        block.modes.contain(mode) { isCommon }
    }

    /// Inserts `item`; registers its kernel readiness when it is a Source1. False if already
    /// present. O(1) amortised, plus an epoll_ctl for a Source1.
    func insert<T: RunLoopItem>(_ item: T) -> Bool {
        guard items.insert(item) else { return false }
        item.registerDescriptors(in: self)
        generation.add(1, ordering: .releasing)
        return true
    }

    func remove<T: RunLoopItem>(_ item: T) -> Bool {
        guard items.remove(item) else { return false }
        item.unregisterDescriptors(from: self)
        generation.add(1, ordering: .releasing)
        return true
    }

    /// The mode's items as of now, for the loop thread: the previous snapshot when nothing
    /// changed since, otherwise a new one taken under `lock`.
    func currentItems(lock: Locked<LoopState>) -> ItemSnapshot {
        let current = generation.load(ordering: .acquiring)
        if let snapshot, snapshot.generation == current { return snapshot }
        let fresh = lock.withLock { _ in
            items.putInOrder()
            return ItemSnapshot(items: items, source1: source1ByToken, kernelOnlySources1: kernelOnlySources1 > 0,
                                alwaysReady: alwaysReadySources(), generation: generation.load(ordering: .relaxed))
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

    /// Adds one descriptor of a port (also used when a port gains a connection after it was
    /// scheduled). Registering a descriptor twice is a no-op. O(1) plus one epoll_ctl.
    func register(_ registration: Source1Registration) {
        guard source1ByToken[registration.token] == nil else { return }
        source1ByToken[registration.token] = registration.source
        kernelOnlySources1 += 1
        generation.add(1, ordering: .releasing)
        do {
            try epoll.add(registration.descriptor, interest: registration.interest, token: registration.token)
        } catch {
            preconditionFailure("RunLoopKit: cannot watch \(registration.descriptor) in mode \(mode) (\(error)); was it closed before being added?")
        }
    }

    /// Removes one descriptor of a port; unregistering one that is not registered is a no-op.
    func unregister(_ registration: Source1Registration) {
        guard source1ByToken.removeValue(forKey: registration.token) != nil else { return }
        kernelOnlySources1 -= 1
        generation.add(1, ordering: .releasing)
        epoll.remove(registration.descriptor)
    }

    // MARK: - fd sources

    /// Adds `source` to the sources of its descriptor: the first one registers the descriptor
    /// (or finds that epoll refuses it), later ones widen the registration's interest.
    func watch(_ source: FileDescriptorSource) {
        let fd = source.fileDescriptor
        if watches[fd] == nil {
            // Pollable until epoll says otherwise (a source asking for no events registers
            // nothing yet, so that is only learnt once it asks for some).
            watches[fd] = DescriptorWatch(token: Source1Token.next())
            kernelOnlySources1 += 1
        }
        watches[fd]!.insert(source)
        reconcileInterest(of: fd)
        let watch = watches[fd]!
        if watch.pollable { source1ByToken[watch.token] = .fileDescriptors(watch.sources) }
        generation.add(1, ordering: .releasing)
    }

    /// Takes `source` from its descriptor's sources; the last one unregisters the descriptor.
    func unwatch(_ source: FileDescriptorSource) {
        let fd = source.fileDescriptor
        guard watches[fd]?.remove(source) == true, let watch = watches[fd] else { return }
        if watch.sources.isEmpty {
            watches[fd] = nil
            if watch.pollable {
                source1ByToken[watch.token] = nil
                kernelOnlySources1 -= 1
                if !watch.registered.isEmpty { epoll.remove(FileDescriptor(rawValue: fd)) }
            } else {
                unpollableWatches -= 1
            }
        } else if watch.pollable {
            // Removing a source only narrows the interest. Narrowing that of a descriptor the
            // caller already closed fails harmlessly: removal never traps.
            let interest = watch.interest
            if interest != watch.registered {
                if interest.isEmpty {
                    epoll.remove(FileDescriptor(rawValue: fd))
                } else {
                    try? epoll.modify(FileDescriptor(rawValue: fd), interest: interest, token: watch.token)
                }
                watches[fd]!.registered = interest
            }
            source1ByToken[watch.token] = .fileDescriptors(watch.sources)
        }
        generation.add(1, ordering: .releasing)
    }

    /// `source`, one of this mode's fd sources, asks for other events now: the registration of
    /// its descriptor follows the union of its sources' events. The sources and their order
    /// are unchanged, so the loop's snapshot stays current (except over a descriptor epoll
    /// refuses, whose sources are listed as always ready only while they ask for something);
    /// a loop asleep on the epoll set sees the new interest at once, as epoll_ctl re-checks
    /// readiness.
    func eventsDidChange(of source: FileDescriptorSource) {
        let fd = source.fileDescriptor
        guard watches[fd]?.recount(source) == true else { return }
        reconcileInterest(of: fd)
        if watches[fd]?.pollable == false { generation.add(1, ordering: .releasing) }
    }

    /// Makes the epoll set watch `fd` for the union of its sources' events: EPOLL_CTL_ADD when
    /// it was not in the set (new, or every source paused), DEL when every source is paused
    /// (epoll would still report errors and hang-ups, which no source asked for), MOD
    /// otherwise; nothing when the union is what the set already watches.
    private func reconcileInterest(of fd: Int32) {
        guard let watch = watches[fd], watch.pollable else { return }
        let interest = watch.interest
        guard interest != watch.registered else { return }
        if interest.isEmpty {
            epoll.remove(FileDescriptor(rawValue: fd))
        } else if watch.registered.isEmpty {
            guard register(fd, interest: interest, token: watch.token) else {
                // epoll refuses the file: it is always ready, as poll(2) reports it.
                watches[fd]!.pollable = false
                kernelOnlySources1 -= 1
                unpollableWatches += 1
                source1ByToken[watch.token] = nil
                generation.add(1, ordering: .releasing)
                return
            }
        } else {
            changeInterest(of: fd, to: interest, token: watch.token)
        }
        watches[fd]!.registered = interest
    }

    /// EPOLL_CTL_ADD for an fd source's descriptor; false when epoll refuses the file (EPERM).
    private func register(_ fd: Int32, interest: Epoll.Interest, token: UInt64) -> Bool {
        do {
            try epoll.add(FileDescriptor(rawValue: fd), interest: interest, token: token)
            return true
        } catch .notPermitted {
            return false
        } catch {
            descriptorFailure(fd, error)
        }
    }

    /// EPOLL_CTL_MOD after the sources of `fd` changed. ENOENT means the descriptor was closed
    /// and its number reused by a new file while watched; the new file is registered afresh.
    private func changeInterest(of fd: Int32, to interest: Epoll.Interest, token: UInt64) {
        do {
            try epoll.modify(FileDescriptor(rawValue: fd), interest: interest, token: token)
        } catch .noEntry {
            if !register(fd, interest: interest, token: token) {
                descriptorFailure(fd, .notPermitted)
            }
        } catch {
            descriptorFailure(fd, error)
        }
    }

    private func descriptorFailure(_ fd: Int32, _ error: Errno) -> Never {
        if error == .badDescriptor {
            preconditionFailure("""
                RunLoopKit: FileDescriptorSource over fd \(fd) added to mode \(mode): closed descriptor \
                (EBADF). Close a descriptor only after invalidating or removing its sources.
                """)
        }
        preconditionFailure("RunLoopKit: cannot watch fd \(fd) in mode \(mode): \(error)")
    }

    /// The sources of descriptors epoll refused, which are ready in every pass (those that
    /// ask for no events excepted: a paused source must not keep the loop from sleeping).
    private func alwaysReadySources() -> [FileDescriptorSource] {
        guard unpollableWatches > 0 else { return [] }
        return watches.values.filter { !$0.pollable }.sorted { $0.token < $1.token }.flatMap(\.sources)
            .filter { !$0.events.isEmpty }
    }
}

/// An immutable copy of a mode's item lists, shared by the passes that see no change.
final class ItemSnapshot: Sendable {
    let sources: [RunLoopSource]
    let timers: [RunLoopTimer]
    let observers: [RunLoopObserver]
    let ports: [MessagePort]
    /// fd sources over descriptors epoll refuses: ready in every pass, for the events they ask for.
    let alwaysReadySources: [FileDescriptorSource]
    /// What the lists above hold, as plain values: a pass tests these, and touches a list (a
    /// retain and release each) only when it has something for the pass to do.
    let observedActivities: ThreadRunLoop.Activity
    let hasSources: Bool
    let hasTimers: Bool
    let hasAlwaysReadySources: Bool
    /// Whether a Source1 of the mode can be ready without the loop knowing it in memory (an fd
    /// source, a send right's connection, a proxy), so that only a poll of the epoll set finds it.
    let hasKernelOnlySources1: Bool
    /// Whether the items alone keep a run of the mode going (Guarantees §3.1).
    let keepsModeAlive: Bool
    /// The ports as a set, for `holds`, when there are too many for a linear scan.
    private let portSet: Set<ObjectIdentifier>
    /// Unique among all snapshots ever taken (never reused, unlike an object's address), so a
    /// port can remember the snapshot that was found to hold it.
    private let serial: UInt64
    private static let serials = Atomic<UInt64>(0)
    private let source1Table: Source1Table
    let generation: UInt64

    init(items: ItemSet, source1: [UInt64: Source1], kernelOnlySources1: Bool,
         alwaysReady: [FileDescriptorSource], generation: UInt64) {
        sources = items.sources
        timers = items.timers
        observers = items.observers
        ports = items.ports
        alwaysReadySources = alwaysReady
        observedActivities = items.observers.reduce(into: []) { $0.formUnion($1.activities) }
        hasSources = !items.sources.isEmpty
        hasTimers = !items.timers.isEmpty
        hasAlwaysReadySources = !alwaysReady.isEmpty
        hasKernelOnlySources1 = kernelOnlySources1
        keepsModeAlive = items.keepsModeAlive
        source1Table = Source1Table(source1)
        portSet = items.ports.count <= 16 ? [] : Set(items.ports.lazy.map(ObjectIdentifier.init))
        self.generation = generation
        serial = Self.serials.add(1, ordering: .relaxed).newValue
    }

    /// Whether `port` is one of the mode's ports. O(1); with many ports, a hash lookup only the
    /// first time a snapshot is asked about a port (the port remembers the answer), not on
    /// every pass that finds it ready.
    func holds(_ port: MessagePort) -> Bool {
        if portSet.isEmpty { return ports.contains { $0 === port } }
        if port.heldBySnapshot.load(ordering: .relaxed) == serial { return true }
        guard portSet.contains(ObjectIdentifier(port)) else { return false }
        port.heldBySnapshot.store(serial, ordering: .relaxed)
        return true
    }

    /// The Source1 registered under `token`.
    func source1(for token: UInt64) -> Source1? {
        source1Table.source(for: token)
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

    /// Whether a block is queued for `mode`, a mode that has no `ModeState` yet (one that has
    /// answers with `ModeState.runs(_:)`, without the hash lookup).
    func hasBlocks(for mode: ThreadRunLoop.Mode) -> Bool {
        blocks.contains { $0.modes.contain(mode) { commonModes.contains(mode) } }
    }

    /// Whether a run of the mode has anything to service (Guarantees §3.1).
    func modeIsAlive(_ modeState: ModeState) -> Bool {
        modeState.items.keepsModeAlive || blocks.contains(where: modeState.runs)
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

/// One mode of one loop: its items and the epoll set the loop sleeps on while running it.
///
/// Each mode has its own epoll set holding the loop's wake-up doorbell and the mode's port
/// doorbells and fd sources, so readiness of an item of mode A cannot wake a loop sleeping
/// in mode B (DESIGN §3.10). Mutated only under the loop's state lock; `epoll` itself is
/// thread-safe and is used by the loop thread outside the lock.
final class ModeState {
    let mode: ThreadRunLoop.Mode
    let epoll: Epoll
    // Guarded by the loop's state lock (see the type's comment).
    @exclusivity(unchecked) var items = ItemSet()
    @exclusivity(unchecked) private var source1ByToken: [UInt64: Source1] = [:]
    /// The same, as a list: with the few Source1s a mode usually has, a linear scan beats hashing.
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
    func insert<T: RunLoopItem>(_ item: T, _ kind: WritableKeyPath<ItemSet, [T]>) -> Bool {
        guard items.insert(item, kind) else { return false }
        for registration in item.source1Registrations { register(registration) }
        return true
    }

    func remove<T: RunLoopItem>(_ item: T, _ kind: WritableKeyPath<ItemSet, [T]>) -> Bool {
        guard items.remove(item, kind) else { return false }
        for registration in item.source1Registrations { unregister(registration) }
        return true
    }

    /// Adds one descriptor of a Source1 (also used when a port gains its connection set after
    /// it was scheduled). Registering a descriptor twice is a no-op.
    /// The Source1 registered under `token` (loop lock held).
    func source1(for token: UInt64) -> Source1? {
        if source1List.count <= 16 {
            return source1List.first { $0.token == token }?.source
        }
        return source1ByToken[token]
    }

    func register(_ registration: Source1Registration) {
        guard source1ByToken[registration.token] == nil else { return }
        source1ByToken[registration.token] = registration.source
        source1List.append((registration.token, registration.source))
        do {
            try epoll.add(registration.descriptor, interest: registration.interest, token: registration.token)
        } catch {
            preconditionFailure("RunLoopKit: cannot watch \(registration.descriptor) in mode \(mode) (\(error)); was it closed before being added?")
        }
    }

    private func unregister(_ registration: Source1Registration) {
        source1ByToken[registration.token] = nil
        source1List.removeAll { $0.token == registration.token }
        epoll.remove(registration.descriptor)
    }
}

/// A block queued by `perform(inModes:)`.
struct PendingBlock {
    let modes: [ThreadRunLoop.Mode]
    let block: @Sendable () -> Void
}

/// Everything about a loop that other threads may change, guarded by the loop's state lock.
struct LoopState {
    var modes: [ThreadRunLoop.Mode: ModeState] = [:]
    var commonModes: Set<ThreadRunLoop.Mode> = [.default]
    var commonItems = ItemSet()
    var blocks: [PendingBlock] = []
    /// The modes of the running invocations, innermost last.
    var modeStack: [ThreadRunLoop.Mode] = []

    func blockMatches(_ block: PendingBlock, _ mode: ThreadRunLoop.Mode) -> Bool {
        block.modes.contains(mode) || (block.modes.contains(.common) && commonModes.contains(mode))
    }

    func hasBlocks(for mode: ThreadRunLoop.Mode) -> Bool {
        blocks.contains { blockMatches($0, mode) }
    }

    /// Whether a run of the mode has anything to service (DESIGN §3.1).
    func modeIsAlive(_ modeState: ModeState) -> Bool {
        modeState.items.keepsModeAlive || hasBlocks(for: modeState.mode)
    }

    /// Whether `item` is still in any mode (or the common set) of this loop.
    func contains(_ item: AnyObject) -> Bool {
        commonItems.contains(item) || modes.values.contains { $0.items.contains(item) }
    }
}

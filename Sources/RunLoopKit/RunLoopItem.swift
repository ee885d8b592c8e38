/// What the run loop needs from every item it can hold (sources, timers, observers, ports,
/// fd sources). Each item kind is its own public class; this protocol lets the loop's
/// bookkeeping (modes, common modes, removal, invalidation) be written once.
protocol RunLoopItem: AnyObject, Sendable {
    /// Where items of this kind live in an `ItemSet`.
    static var itemKind: WritableKeyPath<ItemSet, [Self]> { get }
    var isValid: Bool { get }
    /// Items serviced in ascending order (Source0s, observers, fd sources) return their order;
    /// the others nil (insertion order).
    var sortOrder: Int? { get }
    /// Claims the item for `loop`. Returns false when the item is invalid (adding it is then a
    /// no-op). Items that belong to one loop at most fail a precondition for a second loop.
    func attach(to loop: ThreadRunLoop) -> Bool
    /// The item is no longer in any mode of `loop`.
    func detach(from loop: ThreadRunLoop)
    /// Port and fd sources: the descriptors this item contributes to a mode's epoll set.
    var source1Registrations: [Source1Registration] { get }
    /// Called outside the loop's lock, after the item entered `mode` (Source0's schedule callout).
    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode)
    /// Called outside the loop's lock, after the item left `mode` (Source0's cancel callout).
    func didCancel(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode)
}

extension RunLoopItem {
    var sortOrder: Int? { nil }
    var source1Registrations: [Source1Registration] { [] }
    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {}
    func didCancel(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {}
}

/// What a descriptor in a mode's epoll set stands for.
enum Source1: Sendable {
    /// A local port's doorbell: messages were queued in memory.
    case portDoorbell(MessagePort)
    /// One receive end of a local port's send rights: frames from another process are waiting.
    case portConnection(MessagePort, PortConnections, SeqPacketSocket)
    /// A proxy's socket: watched for the owner hanging up.
    case proxy(MessagePort)
    case fileDescriptor(FileDescriptorSource)
}

/// One descriptor an item registers in each mode's epoll set that holds it.
struct Source1Registration: Sendable {
    var token: UInt64
    var descriptor: FileDescriptor
    var interest: Epoll.Interest
    var source: Source1
}

/// Process-wide unique epoll tokens for Source1s (0 is the loop's own wake-up doorbell).
enum Source1Token {
    private static let counter = TokenCounter()
    static func next() -> UInt64 { counter.next() }
}

import Synchronization

private final class TokenCounter: Sendable {
    private let value = Atomic<UInt64>(0)
    func next() -> UInt64 { value.add(1, ordering: .relaxed).newValue }
}

/// The items of one mode (or of the common pseudo-mode), each kind in the order the loop
/// services it: Source0s and observers sorted by `order` (stable), the rest in insertion order.
struct ItemSet {
    var sources: [RunLoopSource] = []
    var timers: [RunLoopTimer] = []
    var observers: [RunLoopObserver] = []
    var ports: [MessagePort] = []
    var fileDescriptorSources: [FileDescriptorSource] = []

    /// Whether a run in this mode has something to wait for (observers do not count).
    var keepsModeAlive: Bool {
        !sources.isEmpty || !timers.isEmpty || !ports.isEmpty || !fileDescriptorSources.isEmpty
    }

    mutating func insert<T: RunLoopItem>(_ item: T) -> Bool {
        let kind = T.itemKind
        guard !self[keyPath: kind].contains(where: { $0 === item }) else { return false }
        if let order = item.sortOrder {
            let index = self[keyPath: kind].firstIndex { ($0.sortOrder ?? 0) > order } ?? self[keyPath: kind].endIndex
            self[keyPath: kind].insert(item, at: index)
        } else {
            self[keyPath: kind].append(item)
        }
        return true
    }

    mutating func remove<T: RunLoopItem>(_ item: T) -> Bool {
        guard let index = self[keyPath: T.itemKind].firstIndex(where: { $0 === item }) else { return false }
        self[keyPath: T.itemKind].remove(at: index)
        return true
    }

    func contains(_ item: AnyObject) -> Bool {
        sources.contains { $0 === item } || timers.contains { $0 === item } || observers.contains { $0 === item }
            || ports.contains { $0 === item } || fileDescriptorSources.contains { $0 === item }
    }
}

/// An item that belongs to one loop at most (timers, observers, fd sources; ports add their own
/// invalidation steps): validity and loop membership kept by a `LoopMembership`.
protocol SingleLoopItem: RunLoopItem {
    var membership: LoopMembership { get }
}

extension SingleLoopItem {
    func attach(to loop: ThreadRunLoop) -> Bool { membership.attach(to: loop, kind: "\(Self.self)") }
    func detach(from loop: ThreadRunLoop) { membership.detach(from: loop) }

    /// Marks the item invalid and removes it from its loop (once).
    func invalidateMembership() {
        let (wasValid, loop) = membership.invalidate()
        if wasValid, let loop { loop.removeEverywhere(self) }
    }
}

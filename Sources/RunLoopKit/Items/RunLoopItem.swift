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
    /// Ports: the descriptors this item contributes to a mode's epoll set.
    var source1Registrations: [Source1Registration] { get }
    /// Called under the loop's lock once the item entered `modeState`: registers its
    /// descriptors in the mode's epoll set (by default its `source1Registrations`).
    func registerDescriptors(in modeState: ModeState)
    /// Called under the loop's lock once the item left `modeState`.
    func unregisterDescriptors(from modeState: ModeState)
    /// Called outside the loop's lock, after the item entered `mode` (Source0's schedule callout).
    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode)
    /// Called outside the loop's lock, after the item left `mode` (Source0's cancel callout).
    func didCancel(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode)
}

extension RunLoopItem {
    var sortOrder: Int? { nil }
    var source1Registrations: [Source1Registration] { [] }
    func registerDescriptors(in modeState: ModeState) {
        for registration in source1Registrations { modeState.register(registration) }
    }
    func unregisterDescriptors(from modeState: ModeState) {
        for registration in source1Registrations { modeState.unregister(registration) }
    }
    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {}
    func didCancel(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {}
}

/// What a descriptor in a mode's epoll set stands for.
enum Source1: Sendable {
    /// One receive end of a local port's send rights: frames from another process are waiting.
    case portConnection(MessagePort, PortConnections, PortConnection)
    /// A proxy's socket: watched for the owner hanging up.
    case proxy(MessagePort)
    /// One descriptor watched by the mode's fd sources, in the order they are serviced.
    case fileDescriptors([FileDescriptorSource])
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

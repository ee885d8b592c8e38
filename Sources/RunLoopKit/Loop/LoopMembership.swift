import Synchronization

/// Validity, label and the one loop of an item that may be scheduled on one loop at most
/// (timers, observers, ports, fd sources), shared by those item kinds.
final class LoopMembership: Sendable {
    private struct State {
        var loop: ThreadRunLoop?
        var valid = true
        /// The item's `label`, kept under the same lock: read only to report a callout.
        var label: String?
    }
    private let state = Locked(State())
    private let validFlag = Atomic<Bool>(true)

    /// Sequentially consistent (a plain load on x86), because a port's sender
    /// relies on it after publishing a message, against `invalidate()` (`MessagePort.publish`).
    var isValid: Bool { validFlag.load(ordering: .sequentiallyConsistent) }
    var loop: ThreadRunLoop? { state.withLock { $0.loop } }

    /// The item's label (`Callout.label`). Any thread; a lock.
    var label: String? {
        get { state.withLock { $0.label } }
        set { state.withLock { $0.label = newValue } }
    }

    /// Claims `loop`; false when invalid. `kind` names the item in the precondition message.
    func attach(to loop: ThreadRunLoop, kind: String) -> Bool {
        state.withLock { state in
            guard state.valid else { return false }
            if let current = state.loop, current !== loop {
                preconditionFailure("""
                    \(kind) is already scheduled on the run loop of \(current.owner); adding it to a \
                    second run loop (of \(loop.owner)) is a mistake: a \(kind) belongs to one loop at most. \
                    Remove it from the first loop (or invalidate it and make a new one) before moving it.
                    """)
            }
            state.loop = loop
            return true
        }
    }

    func detach(from loop: ThreadRunLoop) {
        state.withLock { if $0.loop === loop { $0.loop = nil } }
    }

    /// Marks the item invalid; returns the loop to remove it from the first time, nil after.
    func invalidate() -> (wasValid: Bool, loop: ThreadRunLoop?) {
        state.withLock { state in
            guard state.valid else { return (false, nil) }
            state.valid = false
            validFlag.store(false, ordering: .sequentiallyConsistent)
            return (true, state.loop)
        }
    }
}

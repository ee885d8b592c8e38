extension ThreadRunLoop {
    /// `[.common]`, the default of the `perform(waitUntilDone:…)` methods, as Foundation's
    /// `performSelector:onThread:` and `performSelectorOnMainThread:` use the common modes: one
    /// shared array, so that a call naming no mode allocates none.
    @usableFromInline static let commonModesList: [Mode] = [.common]

    /// Runs `block` on the loop's thread, in FIFO order with its other blocks, the next time the
    /// loop runs one of `modes` (by default any common mode, as `performSelectorOnMainThread:`
    /// and `performSelector:onThread:` do) — `ThreadRunLoop.main` included. With
    /// `waitUntilDone`, the caller sleeps until the block has run; called on the loop's own
    /// thread, that runs it inline.
    ///
    /// Throws ``ResidentThread/Failure/finished`` when the loop's thread has exited (the block
    /// does not run), also when it exits before a waited-for block ran. A loop whose thread is
    /// alive but never runs one of `modes` never runs the block, and a waiting caller waits for
    /// ever, as with Foundation.
    ///
    /// Any thread. Without waiting: a lock, an array append and ``wakeUp()``; waiting adds a
    /// condition variable and the sleep until the block ran.
    public func perform(waitUntilDone: Bool, inModes modes: [Mode] = commonModesList,
                        _ block: @escaping @Sendable () -> Void) throws(ResidentThread.Failure) {
        if waitUntilDone && ThreadID.current == owner {
            guard !state.withLock({ $0.threadExited }) else { throw .finished }
            block()
            return
        }
        guard waitUntilDone else {
            guard enqueueBlock(PendingBlock(modes: PendingBlock.Modes(modes), work: .block(block))) else {
                throw .finished
            }
            return
        }
        let completion = BlockCompletion()
        guard enqueueBlock(TrackedBlock.pending(modes: modes, completion: completion, block: block)) else {
            throw .finished
        }
        guard completion.wait() else { throw .finished }
    }

    /// Queues a block unless the loop's thread has exited; false then. Any thread; a lock and
    /// ``wakeUp()``.
    func enqueueBlock(_ pending: PendingBlock) -> Bool {
        let queued = state.withLock { state in
            guard !state.threadExited else { return false }
            state.blocks.append(pending)
            return true
        }
        guard queued else { return false }
        blockWasQueued()
        return true
    }
}

/// Whether a waited-for block ran, or was dropped unrun (its loop's thread exited).
private final class BlockCompletion: @unchecked Sendable {
    private let lock = ConditionLock()
    /// nil while pending; guarded by `lock`.
    private var ran: Bool?

    func finish(ran: Bool) {
        lock.withLock {
            if self.ran == nil { self.ran = ran }
            lock.broadcast()
        }
    }

    /// Sleeps until the block ran (true) or was dropped (false).
    func wait() -> Bool {
        lock.withLock {
            while ran == nil { _ = lock.wait(until: nil) }
            return ran!
        }
    }
}

/// The block a waiting `perform` queues. The loop drops the blocks of a thread that exited
/// without running them; the last reference to this object goes with the block, and its
/// deinit then tells the waiting caller, so no loop code has to know about waiters.
private final class TrackedBlock: Sendable {
    let completion: BlockCompletion
    let block: @Sendable () -> Void

    init(completion: BlockCompletion, block: @escaping @Sendable () -> Void) {
        self.completion = completion
        self.block = block
    }

    /// The block to queue. Only the queued block holds the `TrackedBlock`, so that dropping
    /// it unrun is what tells the waiter.
    static func pending(modes: [ThreadRunLoop.Mode], completion: BlockCompletion,
                        block: @escaping @Sendable () -> Void) -> PendingBlock {
        let tracked = TrackedBlock(completion: completion, block: block)
        return PendingBlock(modes: PendingBlock.Modes(modes), work: .block { tracked.run() })
    }

    func run() {
        block()
        completion.finish(ran: true)
    }

    deinit {
        completion.finish(ran: false)
    }
}

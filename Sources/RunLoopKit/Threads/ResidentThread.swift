import Synchronization

/// A named worker thread that lives until told to stop, with its own run loop kept alive
/// without a dummy source or timer: the keep-alive worker of AFNetworking's network thread
/// or XWLivingThread, done right. Work reaches it through `perform`, which counts as a handled
/// source, and ports or timers added to `runLoop`.
///
/// `stop()` (or dropping the last reference) stops the loop and joins the thread; afterwards
/// `perform` throws `.finished` instead of crashing or hanging.
public final class ResidentThread: Sendable, CustomStringConvertible {
    /// Why `perform` could not run a block.
    public enum Failure: Error, Equatable, Sendable {
        /// The thread was stopped (or is stopping) and runs nothing more.
        case finished
    }

    /// The name given at creation (the kernel shows its first 15 bytes in /proc/self/task/*/comm).
    /// Free.
    public let name: String
    /// The thread's run loop: add ports, timers and sources to it from any thread.
    public let runLoop: ThreadRunLoop
    private let core: Core

    /// Starts the thread and returns once its loop is running. Any thread; one pthread_create.
    public init(name: String) {
        self.name = name
        let core = Core(name: name)
        self.core = core
        do {
            core.thread = try KernelThread(name: name) { core.threadMain() }
        } catch {
            preconditionFailure("ResidentThread(name: \"\(name)\"): pthread_create failed: \(error)")
        }
        runLoop = core.waitUntilStarted()
    }

    deinit {
        core.stop(joining: ThreadID.current != runLoop.owner)
    }

    /// True once the thread has left its loop for good. Any thread; a lock.
    public var isFinished: Bool { core.withLock { core.finished } }

    /// Runs `block` on the thread, in FIFO order with other blocks, the next time its loop runs one
    /// of `modes` — by default any common mode, as Foundation's `performSelector:onThread:` (a
    /// block posted while the thread runs a mode marked common, a "tracking" mode, runs in it).
    /// With `waitUntilDone`, the caller sleeps until the block has run; called on the thread
    /// itself, that runs it inline. Throws `.finished` when the thread was stopped (also
    /// when it stops before a waited-for block ran). Any thread.
    public func perform(waitUntilDone: Bool = false, inModes modes: [ThreadRunLoop.Mode] = ThreadRunLoop.commonModesList,
                        _ block: @escaping @Sendable () -> Void) throws(ResidentThread.Failure) {
        guard !core.isStopping else { throw .finished }
        try runLoop.perform(waitUntilDone: waitUntilDone, inModes: modes, block)
    }

    /// Stops the loop and waits for the thread to exit. Idempotent; on the thread itself it
    /// only asks the loop to stop (a thread cannot join itself). Any thread.
    public func stop() {
        core.stop(joining: ThreadID.current != runLoop.owner)
    }

    /// The thread's name and whether it finished, for logs. Any thread; a lock and the string.
    public var description: String {
        "ResidentThread(\"\(name)\", \(runLoop.owner), \(isFinished ? "finished" : "running"))"
    }
}

extension ResidentThread {
    /// The state shared by the handle and the thread. The thread holds only this, never the
    /// `ResidentThread`, so dropping the handle's last reference runs its deinit and stops it.
    final class Core: @unchecked Sendable {
        private let lock = ConditionLock()
        // Guarded by `lock`:
        var thread: KernelThread?
        private(set) var loop: ThreadRunLoop?
        private(set) var stopping = false
        private(set) var finished = false
        private var threadReleased = false
        private let stopFlag = Atomic<Bool>(false)
        private let name: String

        init(name: String) {
            self.name = name
        }

        func withLock<R>(_ body: () -> R) -> R { lock.withLock(body) }

        /// Whether `stop()` was called, as one atomic load (set before `stop()` returns).
        var isStopping: Bool { stopFlag.load(ordering: .acquiring) }

        func threadMain() {
            let loop = ThreadRunLoop.current
            loop.residentKeepAlive.value = true
            loop.state.withLock { $0.threadName = name }
            lock.withLock {
                self.loop = loop
                lock.broadcast()
            }
            while !stopFlag.load(ordering: .acquiring) {
                loop.runInvocation(mode: .default, deadline: nil, returnAfterSourceHandled: false)
            }
            // Calls in flight to the actors pinned here, and what they enqueue, finish first.
            loop.runRemainingJobs()
            lock.withLock {
                finished = true
                lock.broadcast()
            }
        }

        func waitUntilStarted() -> ThreadRunLoop {
            lock.withLock {
                while loop == nil { _ = lock.wait(until: nil) }
                return loop!
            }
        }

        func stop(joining: Bool) {
            let (loop, thread): (ThreadRunLoop?, KernelThread?) = lock.withLock {
                stopping = true
                guard !threadReleased else { return (self.loop, nil) }
                threadReleased = true
                return (self.loop, self.thread)
            }
            stopFlag.store(true, ordering: .releasing)
            loop?.residentStopping.store(true, ordering: .releasing)
            loop?.stop()
            guard let thread else {
                // Another caller joins (or detached) the thread; wait for it to finish.
                if joining { lock.withLock { while !finished { _ = lock.wait(until: nil) } } }
                return
            }
            if joining { thread.join() } else { thread.detach() }
        }
    }
}

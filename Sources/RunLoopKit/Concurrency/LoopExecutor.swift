/// A run loop as a Swift concurrency executor, serial and task executor both: jobs run on the
/// loop's thread, in FIFO order with `perform` blocks, while the loop runs any common mode
/// (Guarantees §3.21). An actor whose `unownedExecutor` is a loop's executor runs every method on
/// that thread, interleaved with the loop's port messages, timers and observers and never
/// concurrently with them; `withTaskExecutorPreference(loop.executor)` runs nonisolated async
/// work there.
///
/// ```swift
/// actor Index {
///     let thread = ResidentThread(name: "index")
///     nonisolated var unownedExecutor: UnownedSerialExecutor {
///         thread.executor.asUnownedSerialExecutor()
///     }
/// }
/// ```
///
/// Each loop has exactly one (`ThreadRunLoop.executor`); it references its loop without
/// retaining it, so it lives as long as the loop does. A job enqueued after the loop's thread
/// exited is a precondition failure naming the thread: it would never run.
public final class LoopExecutor: SerialExecutor, TaskExecutor, Hashable, CustomStringConvertible {
    /// The loop whose thread runs this executor's jobs. Any thread; free.
    public unowned let runLoop: ThreadRunLoop
    /// The serial-executor role, a separate object so that the loop can tell the jobs apart: an
    /// actor's job runs isolated to the loop, a task's nonisolated job must not (run isolated, it
    /// would hop off and be enqueued a second time). The task-executor role is this object
    /// itself, because `Task(executorPreference:)` retains the executor it is given and later
    /// releases the object its `asUnownedTaskExecutor()` names: the two must be the same.
    private let actorRole: ActorRole

    init(runLoop: ThreadRunLoop) {
        self.runLoop = runLoop
        actorRole = ActorRole(runLoop: runLoop)
    }

    /// Queues `job`, a task's that prefers this loop, and wakes the loop. Called by the Swift
    /// runtime, from any thread; a lock, a ring append (no allocation in the steady state) and
    /// at most one wake-up.
    public func enqueue(_ job: consuming ExecutorJob) {
        runLoop.enqueue(UnownedJob(job), asTask: true)
    }

    /// This executor as the runtime's unowned serial-executor reference (its actor role). Any
    /// thread; free.
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: actorRole)
    }

    /// This executor as the runtime's unowned task-executor reference. Any thread; free.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Fails with a message naming the loop's thread unless called on it (used by the runtime
    /// for `assumeIsolated` and `preconditionIsolated` when `isIsolatingCurrentContext()` cannot
    /// tell). Any thread; one gettid(2).
    public func checkIsolated() {
        actorRole.checkIsolated()
    }

    /// True on the loop's thread, where every job of this executor runs; nil elsewhere, so that
    /// the runtime asks `checkIsolated()`, whose failure names the loop's thread. Any thread; one gettid(2).
    public func isIsolatingCurrentContext() -> Bool? {
        actorRole.isIsolatingCurrentContext()
    }

    /// Runs an actor's job the loop took from its queue, isolated to the loop. Loop thread only.
    func run(_ job: UnownedJob) {
        job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
    }

    /// Runs a task's nonisolated job the loop took from its queue. Loop thread only.
    func runTaskJob(_ job: UnownedJob) {
        job.runSynchronously(on: asUnownedTaskExecutor())
    }

    /// The loop as the executor of the actors pinned to it: the identity their
    /// `unownedExecutor` names, which the runtime enqueues their jobs on and asks about isolation.
    final class ActorRole: SerialExecutor {
        unowned let runLoop: ThreadRunLoop

        init(runLoop: ThreadRunLoop) {
            self.runLoop = runLoop
        }

        func enqueue(_ job: consuming ExecutorJob) {
            runLoop.enqueue(UnownedJob(job), asTask: false)
        }

        func checkIsolated() {
            let caller = ThreadID.current
            guard caller != runLoop.owner else { return }
            preconditionFailure("""
                Incorrect actor executor assumption: expected to run on the run loop of \(runLoop.threadLabel) \
                (its LoopExecutor), but running on \(caller)
                """)
        }

        func isIsolatingCurrentContext() -> Bool? {
            ThreadID.current == runLoop.owner ? true : nil
        }
    }

    /// Identity: one executor per loop. Any thread; free.
    public static func == (lhs: LoopExecutor, rhs: LoopExecutor) -> Bool { lhs === rhs }
    /// Hashes the identity. Any thread; free.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// "LoopExecutor(thread <tid> "<name>")". Any thread; a lock.
    public var description: String { "LoopExecutor(\(runLoop.threadLabel))" }
}

extension ResidentThread {
    /// The thread's executor (`runLoop.executor`): pin an actor to the thread with it, or run
    /// async work there with `withTaskExecutorPreference`. Any thread; free.
    public var executor: LoopExecutor { runLoop.executor }
}

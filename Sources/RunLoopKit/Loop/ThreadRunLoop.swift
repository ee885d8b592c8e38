import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A per-thread run loop in the Core Foundation model: modes holding Source0s
/// (`RunLoopSource`), Source1s (`MessagePort`, `FileDescriptorSource`), timers and
/// observers, serviced one pass at a time on the loop's own thread and asleep in the kernel
/// (epoll) in between.
///
/// Items may be added and removed, and `stop`, `wakeUp` and `perform` called, from any
/// thread; every callback runs on the loop's thread. The `run` methods may only be called on
/// the loop's own thread. The Guarantees article gives the exact iteration.
public final class ThreadRunLoop: Sendable, CustomDebugStringConvertible {
    /// epoll token of the loop's wake-up doorbell in every mode's epoll set.
    static let wakeToken: UInt64 = 0
    /// epoll token of the main dispatch queue's eventfd, in the main loop's common modes.
    static let mainQueueToken: UInt64 = .max
    /// How many port messages and fd events one pass services before it goes round again
    /// (so timers, Source0s and observers are never starved by a busy Source1). As many as a
    /// port holds by default: a pass takes a full queue at once, so its blocked sender is woken
    /// once per queue-full. With a quarter of that, on one CPU, the woken sender preempted the
    /// receiver after every quarter: a one-sender stream made 3.3 times the context switches and
    /// ran at 0.6 times the rate (SwiftNIO runs up to 4,096 tasks per tick for the same reason).
    static let source1BatchLimit = 1024
    /// How long one pass of a mode with timers or descriptors hands out port messages before it
    /// goes round to fire due timers and look at its descriptors (Guarantees §3.52). Long enough
    /// that a stream of short messages still takes a whole batch per pass (1,024 messages of a
    /// microsecond), short enough that a slow handler yields after every message.
    static let fairnessSliceNanoseconds: Int64 = 1_000_000

    let owner: ThreadID
    /// Whether this is the main thread's loop, which serves the main dispatch queue.
    let isMain: Bool
    let wakeDoorbell: EventFD
    let state = Locked(LoopState())
    /// Set by `wakeUp()` before it rings; cleared by the loop at the start of each pass.
    /// Deduplicates rings (one write per burst of wake-ups) and tells a real wake-up from
    /// an edge left over from a pass that had already seen the work.
    private let wakePending = Atomic<Bool>(false)
    /// How the loop sleeps right now (`Sleep`), so that a waker rings the right bell, and
    /// only when the loop is asleep.
    private let sleeping = Atomic<UInt8>(Sleep.awake)
    /// Set only across the blocking call itself, once the last look found nothing to do:
    /// unlike `sleeping` (set before that look), it never shows a loop that is about to go
    /// round for work already asked of it.
    private let blockedInKernel = Atomic<Bool>(false)
    /// The bell of a loop asleep on nothing the kernel must watch.
    private let futex = Futex()
    /// Ports with messages for this loop (see `ReadyPorts`).
    let readyPorts = ReadyPorts()
    private let stopRequested = Atomic<Bool>(false)
    private let pendingBlockCount = Atomic<Int>(0)
    /// Buffers for run invocations, reused so a steady pass allocates nothing. Loop thread only.
    private let scratchPool = LoopThreadOnly<[PassScratch]>([])
    /// The state of the mode the last invocation ran (modes are never removed), so running the
    /// same mode again needs no dictionary lookup. Loop thread only.
    private let lastModeState = LoopThreadOnly<ModeState?>(nil)
    /// Set on a `ResidentThread`'s own thread: its keep-alive is a source of the default mode
    /// for every invocation there, nested ones too (Guarantees §3.19). Loop thread only.
    let residentKeepAlive = LoopThreadOnly(false)
    /// Set when the resident thread is told to stop: every invocation its keep-alive holds
    /// returns, nested ones and the outermost alike (a stop taken by a nested run must not leave
    /// the outer one asleep for ever).
    let residentStopping = Atomic<Bool>(false)
    /// The common modes whose epoll sets watch the main dispatch queue's eventfd (main loop only).
    /// Loop thread only.
    private let mainQueueModes = LoopThreadOnly<Set<Mode>>([])
    /// True while the main loop drains the main dispatch queue: a run nested in a main-queue
    /// block does not serve the queue again (libdispatch's drain is not reentrant, and CF skips
    /// it there too). Loop thread only.
    private let drainingMainQueue = LoopThreadOnly(false)
    private let executorSlot = InitializedOnce<LoopExecutor>()
    let counters = LoopCounters()
    /// What the callout hook and the pass boundaries do besides running the loop (`HealthFlags`):
    /// zero, and nothing, unless a slow-callout handler or a `HangWatch` is set. Inline in the
    /// loop so that the hook's test is one load.
    let healthFlags = Atomic<UInt8>(0)
    let health = LoopHealth()
    /// Bumped whenever a timer of this loop changes its fire date or tolerance, or starts or
    /// ends firing, so that a pass recomputes its mode's `TimerSchedule` only after a change.
    private let timerEpoch = Atomic<UInt64>(0)
    /// Set by every invocation that found its mode alive, so that `run(mode:before:)` tells a
    /// mode empty at the call (false) from one its run emptied (true, Guarantees §3.4); nested
    /// invocations only ever set it. Loop thread only.
    private let invocationStarted = LoopThreadOnly<Bool>(false)
    /// When the pass handling Source1s should stop and go round (`LoopInstant` nanoseconds; `.max`:
    /// only a stop ends it early): the earlier of its fairness slice's end and the next timer's
    /// fire date (Guarantees §3.52). Loop thread only.
    private let passYieldsAt = LoopThreadOnly<Int64>(.max)
    /// Actor jobs of this loop's executor running on the thread now (nested runs inside one do not
    /// run another, Guarantees §3.58). Loop thread only.
    private let actorJobDepth = LoopThreadOnly<Int>(0)

    init(owner: ThreadID) {
        self.owner = owner
        isMain = owner == .main
        do {
            wakeDoorbell = try EventFD()
        } catch {
            preconditionFailure("RunLoopKit: cannot create the wake-up eventfd of the run loop of \(owner): \(error)")
        }
        if isMain {
            // libdispatch makes the main queue's eventfd on first use and traps when it cannot.
            // Made with the loop, not when it first runs: a daemon that creates its main loop at
            // startup and only later runs it, after its connections took every descriptor, would
            // otherwise die there.
            _ = MainDispatchQueue.handle
        }
        executorSlot.initialize(LoopExecutor(runLoop: self))
    }

    deinit {
        wakeDoorbell.close()
    }

    // MARK: - Identity and state

    /// The calling thread's run loop, created on first use. One per thread; it lives while the
    /// thread does. Cost: a thread-local read (creation: one eventfd).
    public static var current: ThreadRunLoop { CurrentLoop.loop() }

    /// The main thread's run loop (the thread whose tid is the process id), callable from any thread.
    /// Cost: a load (creation: its eventfd and the main dispatch queue's, which it serves).
    public static var main: ThreadRunLoop { CurrentLoop.mainLoop }

    /// The innermost mode being run, or nil when the loop is not running. Any thread; takes a lock.
    public var currentMode: Mode? { state.withLock { $0.modeStack.last } }

    /// True while the loop's thread is blocked in the kernel waiting for work. Any thread; an atomic load.
    public var isWaiting: Bool { blockedInKernel.load(ordering: .acquiring) }

    /// The modes `.common` stands for; `.default` is one from the start. Any thread; takes a lock.
    public var commonModes: Set<Mode> { state.withLock { $0.commonModes } }

    /// Makes `mode` a common mode: every item added to `.common` (before or after) is in it.
    /// Any thread. Source0 schedule callouts run on the calling thread for the items it gains.
    public func addCommonMode(_ mode: Mode) {
        guard mode != .common else { return }
        let scheduled: [(any RunLoopItem)] = state.withLock { state in
            guard state.commonModes.insert(mode).inserted else { return [] }
            let modeState = state.modeState(for: mode, wakeDoorbell: wakeDoorbell)
            modeState.isCommon = true
            // In service order, so that ties in the new mode keep the order they had in `.common`.
            state.commonItems.putInOrder()
            return state.commonItems.allItems.filter { modeState.insert($0) }
        }
        for item in scheduled { item.didSchedule(in: self, mode: mode) }
        if !scheduled.isEmpty { wakeUp() }
    }

    // MARK: - Control

    /// Makes the innermost running invocation return `.stopped`; when the loop is not
    /// running, the next invocation returns `.stopped` at once (a stop is never lost).
    /// Any thread; two atomics and at most one eventfd write.
    public func stop() {
        stopRequested.store(true, ordering: .sequentiallyConsistent)
        wakeUp()
    }

    /// Wakes the loop if it is asleep so it runs a pass (e.g. after `RunLoopSource.signal()`).
    /// Any thread; one atomic exchange, plus one eventfd write when no wake-up is already pending.
    public func wakeUp() {
        if !wakePending.exchange(true, ordering: .sequentiallyConsistent) { ringIfAsleep() }
    }

    /// A port received by this loop has messages for it (`ReadyPorts`): the loop services it in
    /// its next pass of a mode that holds it, waking for it only then. Any thread; a lock, an
    /// atomic exchange and, when the loop is asleep, one futex or eventfd write.
    func portBecameReady(_ port: MessagePort) {
        if readyPorts.push(port) { ringIfAsleep() }
    }

    /// Only a loop asleep in the kernel needs a ring: one that is still in its pass sees the
    /// flag that was set before this call when it looks before sleeping (`sleep` publishes
    /// that it sleeps, then looks; both sides are sequentially consistent, so one of them sees
    /// the other).
    private func ringIfAsleep() {
        switch sleeping.load(ordering: .sequentiallyConsistent) {
        case Sleep.futex: futex.post()
        case Sleep.epoll: wakeDoorbell.ring()
        default: break
        }
    }

    /// Queues `block` to run on the loop's thread, in FIFO order, the next time the loop runs
    /// one of `modes` (`.common`: any common mode), and wakes the loop. A block counts as a
    /// handled source. Any thread; a lock, an array append and `wakeUp()`.
    public func perform(inModes modes: [Mode] = defaultModes, _ block: @escaping @Sendable () -> Void) {
        // A block for a loop whose thread has exited is dropped here: it would never run.
        _ = enqueueBlock(PendingBlock(modes: PendingBlock.Modes(modes), work: .block(block)))
    }

    /// A block or job was appended to `state.blocks`: counted for the passes, and the loop woken.
    /// Any thread; an atomic add and `wakeUp()`.
    func blockWasQueued() {
        pendingBlockCount.add(1, ordering: .releasing)
        wakeUp()
    }

    /// The loop's Swift concurrency executor: one per loop, the same instance every time.
    /// Any thread; free.
    public var executor: LoopExecutor { executorSlot.value }

    /// Queues a job of the loop's executor (`asTask`: a task's that prefers the loop, rather
    /// than an actor's): FIFO with `perform` blocks, in any common mode. A loop whose thread has
    /// exited runs nothing again, so a job for it is a programmer error, never a silently lost
    /// job. Any thread; a lock and `wakeUp()`.
    func enqueue(_ job: UnownedJob, asTask: Bool) {
        state.withLock { state in
            precondition(!state.threadExited, """
                LoopExecutor: a job was enqueued on the run loop of \(state.threadLabel(owner)), whose \
                thread has exited: the job would never run. An actor or task pinned to a \
                ResidentThread must not be used after the thread was stopped.
                """)
            state.blocks.append(PendingBlock(modes: .common, work: asTask ? .taskJob(job) : .job(job)))
        }
        blockWasQueued()
    }

    /// "thread <tid> "<name>"", for messages about this loop's thread. Any thread; a lock.
    var threadLabel: String { state.withLock { $0.threadLabel(owner) } }

    // MARK: - Running

    /// Runs the default mode until `stop()` or until the mode is empty (CFRunLoopRun). On the
    /// main thread, the main loop's default mode holds the main dispatch queue, so it runs until
    /// `stop()`. Only on the loop's own thread.
    public func run() {
        runInvocation(mode: .default, deadline: nil, returnAfterSourceHandled: false)
    }

    /// Runs the default mode until `stop()`, until the mode is empty, or until `deadline`.
    /// Only on the loop's own thread.
    public func run(until deadline: ContinuousClock.Instant) {
        runInvocation(mode: .default, deadline: deadline, returnAfterSourceHandled: false)
    }

    /// Runs `mode` until one source is handled or `deadline` passes; returns false only when
    /// the mode was empty when called — a run that empties the mode itself (its last one-shot
    /// timer fired) returns true. Only on the loop's own thread.
    @discardableResult
    public func run(mode: Mode, before deadline: ContinuousClock.Instant) -> Bool {
        invocationStarted.value = false
        return runInvocation(mode: mode, deadline: deadline, returnAfterSourceHandled: true) != .finished
            || invocationStarted.value
    }

    /// Runs `mode` for at most `timeout` (CFRunLoopRunInMode). Only on the loop's own thread.
    @discardableResult
    public func run(mode: Mode, for timeout: Duration, returnAfterSourceHandled: Bool) -> RunResult {
        runInvocation(mode: mode, deadline: Self.deadline(after: timeout), returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// A deadline `timeout` from now; nil (no deadline) for timeouts beyond a century, which
    /// callers use to mean "forever" and which would overflow the clock.
    static func deadline(after timeout: Duration) -> ContinuousClock.Instant? {
        timeout >= .seconds(3_155_760_000) ? nil : ContinuousClock.now.advanced(by: max(timeout, .zero))
    }

    /// One run invocation (CFRunLoopRunSpecific).
    @discardableResult
    func runInvocation(mode: Mode, deadline: ContinuousClock.Instant?, returnAfterSourceHandled: Bool) -> RunResult {
        let caller = ThreadID.current
        precondition(caller == owner, """
            ThreadRunLoop.run called on \(caller), but this run loop belongs to \(owner): \
            a run loop may only be run on its own thread (get it with ThreadRunLoop.current on that \
            thread; reach another thread with perform(inModes:) or ResidentThread.perform)
            """)
        guard mode != .common else { return .finished }
        // Sources that are not items: a resident thread's keep-alive (its default mode) and the
        // main dispatch queue (the main loop's common modes, as in CF's __CFRunLoopModeIsEmpty).
        let residentKeepAlive = mode == .default && residentKeepAlive.value
        let mayServeMainQueue = isMain && !drainingMainQueue.value
        let cached = lastModeState.value.flatMap { $0.mode == mode ? $0 : nil }
        let entered: (ModeState, servesMainQueue: Bool)? = state.withLock { state in
            let servesMainQueue = mayServeMainQueue && state.commonModes.contains(mode)
            let keepAlive = residentKeepAlive || servesMainQueue
            if let existing = cached ?? state.modes[mode] {
                guard keepAlive || state.modeIsAlive(existing) else { return nil }
                state.modeStack.append(mode)
                return (existing, servesMainQueue)
            }
            // A mode that never held an item is alive only for a block queued for it.
            guard keepAlive || state.hasBlocks(for: mode) else { return nil }
            state.modeStack.append(mode)
            return (state.modeState(for: mode, wakeDoorbell: wakeDoorbell), servesMainQueue)
        }
        guard let (modeState, servesMainQueue) = entered else { return .finished }
        lastModeState.value = modeState
        invocationStarted.value = true
        let outerMode = health.mode
        health.mode = Unmanaged.passUnretained(modeState)
        health.invocationDepth += 1
        if health.invocationDepth == 1 { healthWoke() } else { healthBoundary() }
        if servesMainQueue { watchMainQueue(in: modeState) }
        let invocation = Invocation(deadline: deadline.map(LoopInstant.init),
                                    returnAfterSourceHandled: returnAfterSourceHandled,
                                    keepAlive: residentKeepAlive || servesMainQueue,
                                    residentKeepAlive: residentKeepAlive,
                                    servesMainQueue: servesMainQueue)
        let scratch = scratchPool.value.popLast() ?? PassScratch()
        scratch.handledLastPass = false
        defer {
            state.withLock { _ = $0.modeStack.popLast() }
            scratchPool.value.append(scratch)
            modeState.dropSnapshot()
            health.invocationDepth -= 1
            health.mode = outerMode
            if health.invocationDepth == 0 { healthIdle() } else { healthBoundary() }
        }

        notify(.entry, observers(of: modeState))
        var result: RunResult? = stopRequested.exchange(false, ordering: .sequentiallyConsistent) ? .stopped : nil
        if invocation.residentKeepAlive && residentStopping.load(ordering: .acquiring) { result = .stopped }
        var firstPass = true
        while result == nil {
            result = runPass(modeState, scratch, invocation, firstPass: firstPass)
            firstPass = false
        }
        notify(.exit, observers(of: modeState))
        return result!
    }

    /// One pass of the loop, in the order of Guarantees §3.2 (__CFRunLoopRun's body). Returns the
    /// invocation's result once an exit condition holds, nil to go round again.
    private func runPass(_ modeState: ModeState, _ scratch: PassScratch, _ invocation: Invocation,
                         firstPass: Bool) -> RunResult? {
        let returnAfterSourceHandled = invocation.returnAfterSourceHandled
        LoopCounters.add(1, to: counters.passes)
        healthBoundary()
        // Anything asked of the loop before this point is seen by this pass. (Cleared only when
        // set: the usual pass, woken by a port, skips the locked exchange.)
        if wakePending.load(ordering: .relaxed) {
            wakePending.store(false, ordering: .sequentiallyConsistent)
        }
        let items = modeState.currentItems(lock: state)

        notify(.beforeTimers, items)
        notify(.beforeSources, items)
        var handled = runBlocks(of: modeState, onlyOne: returnAfterSourceHandled, using: scratch)
        if !(handled && returnAfterSourceHandled), items.hasSources,
           runSources0(items.sources, stopAfterFirst: returnAfterSourceHandled) {
            handled = true
        }
        if handled && returnAfterSourceHandled { return .handledSource }

        // A Source1 that is already ready is handled without sleeping. Ports know it in memory;
        // fd readiness (fd sources, send-right connections, proxies, the main dispatch queue)
        // costs a zero-timeout poll, done once per invocation and after any pass that ran sources
        // (which must not sleep anyway), and only when the mode holds such a Source1.
        // Descriptors epoll refuses are always ready, so while the mode holds one the loop
        // polls in every pass instead of sleeping (as a poll(2) loop would).
        scratch.ready.removeAll()
        let watchesDescriptors = items.hasKernelOnlySources1 || invocation.servesMainQueue
        readyPorts.collect(for: items, of: self, into: scratch.ready)
        // Fairness (§3.52): after a pass that handled something, ports still ready do not keep
        // the descriptors from being looked at, and the descriptors' events go first. (Looked
        // for only when a port is ready: a pass that found none sleeps in the same look.)
        let polledFirst = watchesDescriptors && scratch.handledLastPass && !scratch.ready.isEmpty
        if polledFirst {
            let ports = scratch.ready.count
            _ = waitForSource1(modeState, items, timeoutNanoseconds: 0, consumeWakeUp: false, into: scratch)
            for _ in 0..<ports { scratch.ready.append(scratch.ready.popFirst()!) }
        }
        if scratch.ready.isEmpty {
            if watchesDescriptors && (handled || firstPass || wakeUpOrStopPending || items.hasAlwaysReadySources) {
                _ = waitForSource1(modeState, items, timeoutNanoseconds: 0, consumeWakeUp: false, into: scratch)
            }
            // A wake-up asked for during this pass means new work: go round instead of sleeping.
            if scratch.ready.isEmpty && !handled && !wakeUpOrStopPending && !items.hasAlwaysReadySources {
                notify(.beforeWaiting, items)
                sleep(modeState, items, invocation, into: scratch)
                notify(.afterWaiting, items)
            }
        }
        if items.hasAlwaysReadySources {
            for source in items.alwaysReadySources { scratch.ready.append(.fileDescriptor(source, source.events)) }
        }

        if items.hasTimers { fireDueTimers(modeState, items) }
        let yieldsAt = items.hasTimers || watchesDescriptors ? fairPassEnd(modeState, items) : .max
        if handleSource1(scratch.ready, budget: returnAfterSourceHandled ? 1 : Self.source1BatchLimit,
                         yieldingAt: yieldsAt) > 0 {
            handled = true
        }
        // Blocks and jobs that arrived while the loop slept run in the pass they woke, not the
        // next one (CF's __CFRunLoopDoBlocks after handle_msg).
        if !(handled && returnAfterSourceHandled),
           runBlocks(of: modeState, onlyOne: returnAfterSourceHandled, using: scratch) {
            handled = true
        }

        scratch.handledLastPass = handled
        if handled && returnAfterSourceHandled { return .handledSource }
        if let deadline = invocation.deadline, deadline <= .now { return .timedOut }
        if stopRequested.load(ordering: .relaxed) && stopRequested.exchange(false, ordering: .sequentiallyConsistent) {
            return .stopped
        }
        if invocation.residentKeepAlive && residentStopping.load(ordering: .relaxed) { return .stopped }
        if !invocation.keepAlive && !modeIsAlive(modeState, items) { return .finished }
        return nil
    }

    /// Whether the mode still has something to service. While the pass's snapshot is current
    /// (nothing added or removed since) and its items keep the mode alive, that is known
    /// without the lock; otherwise the lock is taken, which also sees blocks queued for it.
    private func modeIsAlive(_ modeState: ModeState, _ items: ItemSnapshot) -> Bool {
        if items.keepsModeAlive && modeState.isCurrent(items) { return true }
        return state.withLock { $0.modeIsAlive(modeState) }
    }

    // MARK: - Pass steps

    private func observers(of modeState: ModeState) -> [RunLoopObserver] {
        modeState.currentItems(lock: state).observers
    }

    @inline(__always)
    private func notify(_ activity: Activity, _ items: ItemSnapshot) {
        guard items.observedActivities.contains(activity) else { return }
        notify(activity, items.observers)
    }

    @inline(__always)
    private func notify(_ activity: Activity, _ observers: [RunLoopObserver]) {
        guard !observers.isEmpty else { return }
        for observer in observers where observer.activities.contains(activity) {
            callout(.observer, observer) { observer.fire(self, activity) }
        }
    }

    /// Runs the pending blocks and executor jobs of `mode` in FIFO order (one when `onlyOne`).
    private func runBlocks(of modeState: ModeState, onlyOne: Bool, using scratch: PassScratch) -> Bool {
        guard pendingBlockCount.load(ordering: .acquiring) > 0 else { return false }
        // Inside an actor job (a nested run), other actor jobs wait for it to return (§3.58).
        let insideActorJob = actorJobDepth.value > 0
        state.withLock { state in
            if !onlyOne && !insideActorJob && !state.blocks.contains(where: { !modeState.runs($0) }) {
                // The usual case: take them all by swapping buffers, which allocates nothing.
                swap(&scratch.blocks, &state.blocks)
                return
            }
            var takenOne = false
            state.blocks.removeAll { block in
                guard !(onlyOne && takenOne), modeState.runs(block), !(insideActorJob && block.isActorJob) else {
                    return false
                }
                scratch.blocks.append(block)
                takenOne = true
                return true
            }
        }
        guard !scratch.blocks.isEmpty else { return false }
        pendingBlockCount.subtract(scratch.blocks.count, ordering: .relaxed)
        LoopCounters.add(scratch.blocks.count, to: counters.handledSources)
        while let pending = scratch.blocks.popFirst() {
            run(pending)
            if isStopping && !scratch.blocks.isEmpty {
                requeueBlocks(scratch.blocks)
                break
            }
        }
        return true
    }

    /// Puts blocks a pass took and did not run (it was stopped, §3.55) back at the front of the
    /// queue, in order. Loop thread only; a lock.
    private func requeueBlocks(_ taken: RingBuffer<PendingBlock>) {
        let count = taken.count
        state.withLock { state in
            while let queued = state.blocks.popFirst() { taken.append(queued) }
            taken.swapContents(with: state.blocks)
        }
        pendingBlockCount.add(count, ordering: .relaxed)
        LoopCounters.add(-count, to: counters.handledSources)
    }

    /// Performs the signalled Source0s in ascending order, clearing each signal first.
    private func runSources0(_ sources: [RunLoopSource], stopAfterFirst: Bool) -> Bool {
        var performed = false
        for source in sources where source.isSignalled {
            guard source.takeSignal(), source.isValid else { continue }
            callout(.source, source) { source.performCallout() }
            LoopCounters.add(1, to: counters.handledSources)
            performed = true
            if stopAfterFirst { break }
        }
        return performed
    }

    /// Fires the timers whose fire date has come, earliest first. Timers never count as handled
    /// sources. A pass in which none is due costs a clock read and a comparison, however many
    /// timers the mode holds; the timers are looked at one by one only when one is due.
    private func fireDueTimers(_ modeState: ModeState, _ items: ItemSnapshot) {
        guard let earliest = timerSchedule(modeState, items).earliestFire, earliest <= .now else { return }
        let now = ContinuousClock.now
        let due = items.timers.filter { $0.isDue(at: now) }
        var fired = 0
        for timer in due.sorted(by: { $0.fireDate < $1.fireDate }) {
            // Bumped on both sides of the callout: a run nested in the handler must leave the
            // firing timer out, and the next pass must see its new fire date.
            timerEpoch.add(1, ordering: .releasing)
            if callout(.timer, timer, { timer.fire(now: now) }) { fired += 1 }
            timerEpoch.add(1, ordering: .releasing)
        }
        LoopCounters.add(fired, to: counters.timerFires)
    }

    /// The mode's timer schedule, recomputed (one lock per timer) only when the mode's items
    /// or a timer of this loop changed since it was last computed. Loop thread only.
    private func timerSchedule(_ modeState: ModeState, _ items: ItemSnapshot) -> TimerSchedule {
        let epoch = timerEpoch.load(ordering: .acquiring)
        if modeState.timerSchedule.isCurrent(generation: items.generation, epoch: epoch) {
            return modeState.timerSchedule
        }
        let schedule = TimerSchedule(items.timers, generation: items.generation, epoch: epoch)
        modeState.timerSchedule = schedule
        return schedule
    }

    /// When a pass of a mode with timers or descriptors stops handing out Source1s: a fairness
    /// slice from now, or the next timer's fire date if that comes first. Loop thread only; a
    /// clock read.
    private func fairPassEnd(_ modeState: ModeState, _ items: ItemSnapshot) -> Int64 {
        let sliceEnd = LoopInstant.now.nanoseconds.saturatingAdding(Self.fairnessSliceNanoseconds)
        guard items.hasTimers, let fire = timerSchedule(modeState, items).earliestFire else { return sliceEnd }
        return min(sliceEnd, fire.nanoseconds)
    }

    /// Whether the pass in progress should hand out no more port messages or fd events: the loop
    /// was stopped (it takes effect after the callout in progress, §3.55), or the pass's fairness
    /// slice is over (§3.52). Loop thread only, between callouts; two relaxed loads, and a clock
    /// read in a mode with timers or descriptors.
    @inline(__always)
    var passShouldYield: Bool {
        if isStopping { return true }
        let yieldsAt = passYieldsAt.value
        return yieldsAt != .max && LoopInstant.now.nanoseconds >= yieldsAt
    }

    /// A stop is pending for the innermost invocation, or the resident thread is stopping. Two
    /// relaxed loads.
    @inline(__always)
    private var isStopping: Bool {
        stopRequested.load(ordering: .relaxed) || residentStopping.load(ordering: .relaxed)
    }

    /// Runs a block or job as a callout. While an actor job of this loop's executor runs, runs
    /// nested in it run no other actor job (§3.58). Loop thread only.
    private func run(_ pending: PendingBlock) {
        switch pending.work {
        case .block(let block): callout(.block, nil) { block() }
        case .job(let job):
            actorJobDepth.value += 1
            defer { actorJobDepth.value -= 1 }
            callout(.job, nil) { executor.run(job) }
        case .taskJob(let job): callout(.job, nil) { executor.runTaskJob(job) }
        }
    }

    /// Runs every executor job queued on the loop, and those they enqueue, until none is left,
    /// then closes the loop to jobs (a later one traps, naming the thread): a resident thread that
    /// was told to stop does this before it exits, so calls in flight to its actors finish
    /// (§3.59). Blocks queued meanwhile stay queued, and are dropped when the thread exits. Loop
    /// thread only.
    func runRemainingJobs() {
        while true {
            let jobs: [PendingBlock] = state.withLock { state in
                var jobs: [PendingBlock] = []
                state.blocks.removeAll { pending in
                    guard pending.isJob else { return false }
                    jobs.append(pending)
                    return true
                }
                if jobs.isEmpty { state.threadExited = true }
                return jobs
            }
            guard !jobs.isEmpty else { return }
            pendingBlockCount.subtract(jobs.count, ordering: .relaxed)
            LoopCounters.add(jobs.count, to: counters.handledSources)
            for pending in jobs { run(pending) }
        }
    }

    /// A timer of this loop changed its fire date or tolerance: the loop recomputes its
    /// schedule and re-arms its wait. Any thread; an atomic add and `wakeUp()`.
    func timersDidChange() {
        timerEpoch.add(1, ordering: .releasing)
        wakeUp()
    }

    /// Delivers ready port messages and fd events in arrival order, at most `budget` of them,
    /// until `yieldsAt` passes or the loop is stopped: then the ports and descriptors left are
    /// handled by a later pass (§3.52, §3.55).
    private func handleSource1(_ ready: RingBuffer<Source1Event>, budget: Int, yieldingAt yieldsAt: Int64) -> Int {
        let outerYield = passYieldsAt.value
        passYieldsAt.value = yieldsAt
        defer { passYieldsAt.value = outerYield }
        var remaining = budget
        defer {
            // Ports left over when the budget ran out keep their place; fd events are found
            // again by the next epoll_wait (level-triggered).
            while let event = ready.popFirst() {
                if case .port(let port) = event, port.hasDeliverableMessages { readyPorts.keep(port) }
            }
            LoopCounters.add(budget - remaining, to: counters.handledSources)
        }
        var first = true
        while remaining > 0, let event = ready.popFirst() {
            // The first Source1 of a pass is always handled, however late the pass is: timers
            // slower than their interval must not starve the ports either.
            let yielding = first ? isStopping : passShouldYield
            first = false
            switch event {
            case .port(let port) where yielding:
                if port.hasDeliverableMessages { readyPorts.keep(port) }
            case .fileDescriptor where yielding:
                break
            case .port(let port):
                // Kept before it is serviced, so that a run nested in its handler finds it and
                // continues the batch being delivered; the next pass drops it if it has nothing left.
                // One callout per message (or per batch, for a batch handler), inside.
                readyPorts.keep(port)
                remaining -= port.service(upTo: remaining, on: self)
            case .proxyHungUp(let port):
                // The owner of the port died or invalidated it: the dead-name notification.
                callout(.port, port) { port.invalidate() }
                remaining -= 1
            case .fileDescriptor(let source, let events):
                if callout(source.calloutKind, source, { source.handle(events) }) { remaining -= 1 }
            case .mainQueue:
                drainingMainQueue.value = true
                callout(.mainQueue, nil) { MainDispatchQueue.drain() }
                drainingMainQueue.value = false
                remaining -= 1
            }
        }
        return budget - remaining
    }

    /// Adds the main dispatch queue's eventfd to a common mode's epoll set, once per mode. It is
    /// edge-triggered like the loop's doorbells: libdispatch writes it for every wake-up, and
    /// adding it while it holds a count reports it at once, so work queued before the loop
    /// first ran is found. Main thread only.
    private func watchMainQueue(in modeState: ModeState) {
        guard mainQueueModes.value.insert(modeState.mode).inserted else { return }
        do {
            try modeState.epoll.add(MainDispatchQueue.handle, interest: [.readable, .edgeTriggered], token: Self.mainQueueToken)
        } catch {
            preconditionFailure("RunLoopKit: cannot watch the main dispatch queue in mode \(modeState.mode): \(error)")
        }
    }

    // MARK: - Waiting

    /// Sleeps in the kernel until a Source1 of the mode is ready, a wake-up is asked for, the
    /// earliest timer's tolerance window closes, or the invocation's deadline passes. A mode
    /// the kernel must watch for (fd sources, send rights' connections, proxies, the main
    /// dispatch queue) sleeps in its epoll set; any other on the loop's futex, a cheaper sleep
    /// and wake than an eventfd and epoll's ready list. Rings that carry nothing for this mode
    /// (a port of another mode, an edge whose work an earlier pass already did) do not
    /// end the sleep.
    private func sleep(_ modeState: ModeState, _ items: ItemSnapshot, _ invocation: Invocation,
                       into scratch: PassScratch) {
        var wakeAt = invocation.deadline
        if items.hasTimers, let date = timerSchedule(modeState, items).wakeInstant(now: .now),
           wakeAt.map({ date < $0 }) ?? true {
            wakeAt = date
        }
        let inEpoll = items.hasKernelOnlySources1 || invocation.servesMainQueue
        sleeping.store(inEpoll ? Sleep.epoll : Sleep.futex, ordering: .sequentiallyConsistent)
        healthIdle()
        defer {
            sleeping.store(Sleep.awake, ordering: .releasing)
            healthWoke()
        }
        while true {
            if !inEpoll { futex.reset() }
            // Work asked for since the pass looked did not ring (the loop was not asleep yet).
            if wakeUpOrStopPending { return }
            if readyPorts.isPending {
                readyPorts.collect(for: items, of: self, into: scratch.ready)
                if !scratch.ready.isEmpty { return }
            }
            blockedInKernel.store(true, ordering: .releasing)
            let returned = inEpoll
                ? waitForSource1(modeState, items, timeoutNanoseconds: wakeAt?.remainingNanoseconds,
                                 consumeWakeUp: true, into: scratch)
                : !futex.wait(timeoutNanoseconds: wakeAt?.remainingNanoseconds)
            blockedInKernel.store(false, ordering: .releasing)
            let woken = returned || (!inEpoll && wakePending.exchange(false, ordering: .sequentiallyConsistent))
            if woken || !scratch.ready.isEmpty {
                LoopCounters.add(1, to: counters.wakeUps)
                return
            }
        }
    }

    /// Sequentially consistent, because `sleep` relies on it against `wakeUp` (a plain load on
    /// x86, so the pass pays nothing for it there).
    private var wakeUpOrStopPending: Bool {
        wakePending.load(ordering: .sequentiallyConsistent) || stopRequested.load(ordering: .sequentiallyConsistent)
    }

    /// One epoll_wait on the mode's set, appending what is ready to `scratch.ready`. Returns
    /// true for a real wake-up (when `consumeWakeUp`), a timeout or EINTR.
    private func waitForSource1(_ modeState: ModeState, _ passItems: ItemSnapshot, timeoutNanoseconds: Int64?,
                                consumeWakeUp: Bool, into scratch: PassScratch) -> Bool {
        let count: Int
        do {
            count = try modeState.epoll.wait(timeoutNanoseconds: timeoutNanoseconds)
        } catch {
            preconditionFailure("RunLoopKit: epoll_wait failed in mode \(modeState.mode): \(error)")
        }
        if count == 0 { return true }
        var woken = false
        // The snapshot is refreshed if anything was added or removed since the pass began, so
        // an event is never attributed to an item that has left the mode.
        let items = modeState.isCurrent(passItems) ? passItems : modeState.currentItems(lock: state)
        for index in 0..<count {
            let event = modeState.epoll.event(at: index)
            if event.token == Self.wakeToken {
                if consumeWakeUp && wakePending.exchange(false, ordering: .sequentiallyConsistent) { woken = true }
                continue
            }
            if event.token == Self.mainQueueToken {
                // Inside a main-queue drain the edge is passed over: the drain rings again for
                // whatever it leaves queued.
                if !drainingMainQueue.value { scratch.ready.append(.mainQueue) }
                continue
            }
            switch items.source1(for: event.token) {
            case .portConnection(let port, let connections, let socket)?:
                port.connectionBecameReadable(socket, of: connections)
                scratch.ready.append(.port(port))
            case .proxy(let port)?:
                if event.hungUp { scratch.ready.append(.proxyHungUp(port)) }
            case .fileDescriptors(let sources)?:
                var events: FileDescriptorSource.Events = []
                if event.readable || event.failed { events.insert(.readable) }
                if event.writable || event.failed { events.insert(.writable) }
                for source in sources where !source.events.isDisjoint(with: events) {
                    scratch.ready.append(.fileDescriptor(source, events))
                }
            case nil:
                break
            }
        }
        return woken
    }

    // MARK: - Thread exit

    /// Called by the thread-local destructor when the owning thread exits: removes every item
    /// (running Source0 cancel callouts) and drops pending blocks, so the loop holds nothing.
    /// A Swift concurrency job still queued would be lost silently: that is a precondition failure.
    func threadDidExit() {
        let (modes, common) = state.withLock { state -> ([ModeState], ItemSet) in
            state.threadExited = true
            let lostJobs = state.blocks.count { $0.isJob }
            precondition(lostJobs == 0, """
                LoopExecutor: \(state.threadLabel(owner)) exited with \(lostJobs) Swift concurrency job(s) \
                still queued on its run loop, which would never run. Stop a ResidentThread only once \
                the actors and tasks pinned to its executor are done.
                """)
            state.blocks.removeAll()
            return (Array(state.modes.values), state.commonItems)
        }
        for item in common.allItems { removeEverywhere(item) }
        for modeState in modes {
            for item in state.withLock({ _ in modeState.items.allItems }) { removeEverywhere(item) }
        }
    }

    // MARK: - Description

    /// The loop's thread, modes and items, for debugging. Any thread; the loop's lock and the
    /// string.
    public var debugDescription: String {
        state.withLock { state in
            LoopDescription(loop: self, state: state).text
        }
    }
}

/// Buffers one run invocation reuses across its passes. Loop thread only; nested invocations
/// take their own from the loop's pool.
final class PassScratch {
    // Thread-confined, so the runtime's exclusivity bookkeeping (a sizeable share of a pass)
    // buys nothing here.
    let ready = RingBuffer<Source1Event>(initialCapacity: 64)
    @exclusivity(unchecked) var blocks = RingBuffer<PendingBlock>()
    /// Whether the invocation's last pass handled anything (it did not sleep): the next one then
    /// looks at the descriptors even while ports are ready (§3.52).
    var handledLastPass = false
}

/// A Source1 found ready by the loop.
enum Source1Event {
    case port(MessagePort)
    case proxyHungUp(MessagePort)
    case fileDescriptor(FileDescriptorSource, FileDescriptorSource.Events)
    /// The main dispatch queue has work (main loop, common modes).
    case mainQueue
}

/// How a loop sleeps: the values of `ThreadRunLoop.sleeping`.
enum Sleep {
    static let awake: UInt8 = 0
    static let futex: UInt8 = 1
    static let epoll: UInt8 = 2
}

/// What one run invocation was asked for, fixed for all its passes.
struct Invocation {
    var deadline: LoopInstant?
    var returnAfterSourceHandled: Bool
    /// Runs on while the mode's items are gone: a resident thread's default mode, or a common
    /// mode of the main loop, which holds the main dispatch queue.
    var keepAlive: Bool
    /// Held alive by a resident thread's keep-alive, which ends when the thread is stopped.
    var residentKeepAlive: Bool
    var servesMainQueue: Bool
}

extension LoopState {
    /// The state of `mode`, created (with its epoll set) on first use.
    mutating func modeState(for mode: ThreadRunLoop.Mode, wakeDoorbell: EventFD) -> ModeState {
        if let existing = modes[mode] { return existing }
        let created = ModeState(mode: mode, wakeDoorbell: wakeDoorbell)
        created.isCommon = commonModes.contains(mode)
        modes[mode] = created
        return created
    }
}

extension ItemSet {
    var allItems: [any RunLoopItem] {
        sources as [any RunLoopItem] + timers + observers + ports + fileDescriptorSources
    }
}

import Synchronization

/// Watches run loops from a thread of its own and reports a loop that stays inside one callout —
/// or one pass — for longer than `threshold`: once per stall, within 2 × `threshold`, with the
/// callout it is stuck in (nil when it is stuck in the pass itself, between callouts). A loop is
/// reported again only after it came back and stalled anew. A loop asleep in its wait, however
/// long, and one that keeps completing passes are never reported (Guarantees §3.37).
///
/// ```swift
/// let watch = HangWatch(loops: [.main, worker.runLoop], threshold: .seconds(1)) { loop, callout in
///     log("\(loop.threadName) stuck: \(callout.map(String.init(describing:)) ?? "between callouts")")
/// }
/// ```
///
/// The handler runs on the watch's thread, not on the stuck loop's.
///
/// How it stays cheap: while watched, a loop publishes a counter at every pass boundary and the
/// callout it is inside (a few plain stores; one read of the CPU's tick counter per callout where
/// the kernel keeps time with it, else of the clock), and reads no clock for
/// the passes — the watch keeps the time. The watch thread looks at the loops every quarter of
/// `threshold` while one of them is busy or has moved since the last look, and sleeps without a
/// timeout once every loop has stayed asleep in its wait (or not running) for a look: the first
/// loop to wake then wakes it (one futex wake, the only system call a watch ever costs a loop). So a stall is seen within a quarter of `threshold` of
/// its start and reported a `threshold` later; one that ends before it is reported is not
/// reported at all (use `setSlowCalloutHandler` to hear of every long callout).
///
/// The watch holds its loops until `stop()`; dropping the last reference stops it too.
public final class HangWatch: Sendable {
    private let watcher: HangWatcher

    /// Starts a thread watching `loops`. A loop may be watched by several watches. Any thread;
    /// one pthread_create and a lock per loop. A threshold that is not positive is a
    /// precondition failure.
    public init(loops: [ThreadRunLoop], threshold: Duration,
                handler: @escaping @Sendable (ThreadRunLoop, ThreadRunLoop.Callout?) -> Void) {
        precondition(threshold > .zero, "HangWatch(threshold: \(threshold)): the threshold must be positive")
        var distinct: [ThreadRunLoop] = []
        for loop in loops where !distinct.contains(where: { $0 === loop }) { distinct.append(loop) }
        watcher = HangWatcher(loops: distinct, threshold: threshold.nanoseconds, handler: handler)
        watcher.start()
    }

    deinit {
        watcher.stop()
    }

    /// Stops watching: the loops stop publishing for this watch, and the watch thread exits
    /// (joined, unless `stop()` is called from the handler, on that thread). No report starts
    /// after `stop()` returns. Idempotent. Any thread.
    public func stop() {
        watcher.stop()
    }
}

/// The state and thread of one `HangWatch`; the loops it watches hold its `waker` while it watches them.
final class HangWatcher: @unchecked Sendable {
    let loops: [ThreadRunLoop]
    private let threshold: Int64
    /// How often the watch looks at its loops while one is busy.
    private let step: Int64
    private let handler: @Sendable (ThreadRunLoop, ThreadRunLoop.Callout?) -> Void
    /// What the loops hold of the watch, to wake it (not the watch itself, which holds them).
    let waker = HangWatchWaker()
    private let stopped = Atomic<Bool>(false)
    private let lifecycle = ConditionLock()
    // Guarded by `lifecycle`:
    private var thread: KernelThread?
    private var threadID: ThreadID?
    private var finished = false
    private var stopping = false

    init(loops: [ThreadRunLoop], threshold: Int64,
         handler: @escaping @Sendable (ThreadRunLoop, ThreadRunLoop.Callout?) -> Void) {
        self.loops = loops
        self.threshold = threshold
        step = max(threshold / 4, 1)
        self.handler = handler
    }

    /// Registers with the loops, then starts the thread (whose first look then sees what they
    /// publish from now on).
    func start() {
        for loop in loops { loop.health.add(waker, flags: loop.healthFlags) }
        lifecycle.withLock {
            do {
                thread = try KernelThread(name: "hang-watch") { [self] in watch() }
            } catch {
                preconditionFailure("HangWatch: pthread_create failed: \(error)")
            }
        }
    }

    func stop() {
        let (thread, isWatchThread): (KernelThread?, Bool) = lifecycle.withLock {
            guard !stopping else { return (nil, threadID == ThreadID.current) }
            stopping = true
            defer { self.thread = nil }
            return (self.thread, threadID == ThreadID.current)
        }
        stopped.store(true, ordering: .sequentiallyConsistent)
        waker.bell.post()
        for loop in loops { loop.health.remove(waker, flags: loop.healthFlags) }
        if let thread {
            if isWatchThread { thread.detach() } else { thread.join() }
        } else if !isWatchThread {
            lifecycle.withLock { while !finished { _ = lifecycle.wait(until: nil) } }
        }
    }

    // MARK: - The watch thread

    /// What the watch knows of one loop.
    private struct Watched {
        /// The busy `progress` value last seen, and when it was first seen.
        var progress: UInt64?
        var since = LoopInstant(nanoseconds: 0)
        var reported = false
    }

    private func watch() {
        lifecycle.withLock { threadID = .current }
        defer {
            lifecycle.withLock {
                finished = true
                lifecycle.broadcast()
            }
        }
        var watched = [Watched](repeating: Watched(), count: loops.count)
        var progressSeen: [UInt64] = []
        while !stopped.load(ordering: .sequentiallyConsistent) {
            // Reset before looking: a stop (or a loop ringing a parked watch) after the look
            // makes the wait below return at once.
            waker.bell.reset()
            let now = LoopInstant.now
            var wakeAt: LoopInstant?
            for index in loops.indices {
                guard let due = look(at: index, &watched[index], now: now) else { continue }
                wakeAt = min(wakeAt ?? due, due)
            }
            // Every loop idle, but some moved since the last look: look once more a step later
            // rather than park. A watch that parked whenever it caught its loops between two
            // passes was rung awake by nearly every wake-up of a busy loop (a futex wake and two
            // context switches each: perform went from 3.4 to 4.5 µs, pinned).
            let progress = loops.map { $0.health.progress.load(ordering: .relaxed) }
            if wakeAt == nil && progress != progressSeen { wakeAt = now.advanced(byNanoseconds: step) }
            progressSeen = progress
            if stopped.load(ordering: .sequentiallyConsistent) { break }
            if let wakeAt {
                _ = waker.bell.wait(timeoutNanoseconds: wakeAt.remainingNanoseconds)
            } else {
                park()
            }
        }
    }

    /// Looks at one loop; reports it if it has been stuck for `threshold`. Returns when to look
    /// again, nil while the loop is idle.
    private func look(at index: Int, _ state: inout Watched, now: LoopInstant) -> LoopInstant? {
        let loop = loops[index]
        let progress = loop.health.progress.load(ordering: .sequentiallyConsistent)
        guard isBusy(loop, progress) else {
            state = Watched()
            return nil
        }
        if state.progress != progress { state = Watched(progress: progress, since: now) }
        let due = state.since.advanced(byNanoseconds: threshold)
        if !state.reported && now >= due {
            // The report gives the stall's length: a callout that began late in it (the loop
            // was stuck between callouts first) is not reported as shorter than the stall.
            let stall = Duration.nanoseconds(state.since.nanoseconds.distance(to: now.nanoseconds))
            let callout = loop.health.calloutInProgress().map { callout in
                var callout = callout
                callout.duration = max(callout.duration, stall)
                return callout
            }
            // Still the same stall: the callout read belongs to it. A loop that came back
            // meanwhile is looked at afresh next time.
            guard loop.health.progress.load(ordering: .sequentiallyConsistent) == progress else {
                return now.advanced(byNanoseconds: step)
            }
            state.reported = true
            if !stopped.load(ordering: .sequentiallyConsistent) { handler(loop, callout) }
        }
        let next = now.advanced(byNanoseconds: step)
        return state.reported ? next : min(due, next)
    }

    /// Busy: inside a pass. Before a loop has published anything for this watch, the loop is
    /// asked directly (a lock, only then).
    private func isBusy(_ loop: ThreadRunLoop, _ progress: UInt64) -> Bool {
        if progress == LoopHealth.unknownProgress { return !loop.isWaiting && loop.currentMode != nil }
        return progress & 1 == 0
    }

    /// Sleeps until a loop leaves its wait (or `stop()`), after checking — counted in each loop's
    /// `parkedWatches` and with `parked` set, so that a loop waking meanwhile rings it — that every
    /// loop is still idle.
    private func park() {
        for loop in loops { loop.health.parkedWatches.add(1, ordering: .sequentiallyConsistent) }
        defer { for loop in loops { loop.health.parkedWatches.subtract(1, ordering: .sequentiallyConsistent) } }
        waker.parked.store(true, ordering: .sequentiallyConsistent)
        if ProcessBarrier.isAvailable { ProcessBarrier.heavy() }
        let allIdle = loops.allSatisfy { !isBusy($0, $0.health.progress.load(ordering: .sequentiallyConsistent)) }
        if allIdle && !stopped.load(ordering: .sequentiallyConsistent) {
            _ = waker.bell.wait(timeoutNanoseconds: nil)
        }
        waker.parked.store(false, ordering: .sequentiallyConsistent)
    }
}

/// The part of a `HangWatcher` its loops hold: the bell that wakes a parked watch. Holding the
/// watcher itself, which holds the loops, would make a cycle that outlives `stop()` (a loop
/// refreshes its copy of the list only when it wakes while watched).
final class HangWatchWaker: Sendable {
    /// Set while the watch thread sleeps with no timeout (every loop idle): a loop leaving its
    /// wait then rings `bell`.
    let parked = Atomic<Bool>(false)
    let bell = Futex()

    /// A watched loop left its wait (or began running). Loop thread; one sequentially consistent
    /// load, and a futex wake only when the watch is parked.
    func loopBecameBusy() {
        if parked.load(ordering: .sequentiallyConsistent) && parked.exchange(false, ordering: .sequentiallyConsistent) {
            bell.post()
        }
    }
}

import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The bits of `ThreadRunLoop.healthFlags`: what the callout hook and the pass boundaries must
/// do besides running the loop. Zero (the usual case) means nothing at all.
enum HealthFlags {
    /// A slow-callout handler is set: callouts are timed.
    static let slowCallouts: UInt8 = 1 << 0
    /// A `HangWatch` watches the loop: pass boundaries and callouts are published.
    static let watched: UInt8 = 1 << 1
    /// Callouts are timed with the CPU's tick counter (`CycleCounter`), not the clock.
    static let cycleCounter: UInt8 = 1 << 2
    /// The loop's side of its Dekker pairs with its watches is `ProcessBarrier.light()`: the
    /// watches' side runs `ProcessBarrier.heavy()`.
    static let lightBarrier: UInt8 = 1 << 3
    /// A `runloopctl trace` is attached: each callout is recorded (`TraceRecorders`).
    static let traced: UInt8 = 1 << 4
    /// The bits for which a callout is timed for health reports.
    static let timed: UInt8 = slowCallouts | watched
}

/// A loop's health reporting: its slow-callout handler, and what it publishes for the hang
/// watches that watch it.
///
/// **What a watch reads.** The loop's thread is the only writer, and writes only while watched:
/// - `progress`, a counter bumped at every pass boundary (a pass beginning, going to sleep,
///   waking, an invocation beginning or ending), odd while the loop is asleep in its wait or not
///   running, even while it is busy. A watch that sees the same even value for longer than its
///   threshold has seen a loop stuck in one pass. No clock is read for it: the watch keeps the
///   time itself.
/// - the callout in progress, a seqlock-published record (kind, msgid, start, the item and the
///   mode as unretained pointers). The item is alive while its callout runs (the loop holds it);
///   a watch that wants its label sets `inspecting` under `inspectionLock` before it checks the
///   record, and the loop, leaving a callout, waits for that lock when it sees `inspecting`
///   (Dekker), so an item is never retained after the loop let go of it.
///
/// Waking a watch costs the loop only on the way out of its wait, and only when the watch is
/// parked (all its loops were idle): a watch never polls a loop that sleeps.
///
/// **Barriers.** Both Dekker pairs (the record against `inspecting`, `progress` on waking against
/// a parking watch) would need a locked instruction on the loop's side, twice a pass. Where the
/// kernel has membarrier(2) the loop's side is only a compiler barrier and the watch, which
/// inspects and parks rarely, pays for both (`ProcessBarrier`); elsewhere both sides are
/// sequentially consistent.
final class LoopHealth: @unchecked Sendable {
    /// `progress` while the loop has not published since a watch began: the watch asks the loop
    /// itself (`isWaiting`, `currentMode`) what it is doing.
    static let unknownProgress: UInt64 = 0
    /// Set in `recordSequence` when a watch begins: the record may be from an earlier watch.
    static let staleRecord: UInt64 = 1 << 63

    // MARK: Slow callouts

    private struct Configuration {
        var slowCallouts: (threshold: Int64, handler: @Sendable (ThreadRunLoop.Callout) -> Void)?
        var watchers: [HangWatchWaker] = []
        var traced = false
    }
    private let configuration = Locked(Configuration())
    /// The slow-callout threshold in nanoseconds, read by the loop after each timed callout.
    private let slowThreshold = Atomic<Int64>(.max)

    // MARK: Published for hang watches (written by the loop thread only)

    let progress = Atomic<UInt64>(1)
    private let recordSequence = Atomic<UInt64>(0)
    /// Kind code (0: no callout) | has-msgid bit 8 | msgid in the high 32 bits.
    private let recordKind = Atomic<UInt64>(0)
    private let recordStarted = Atomic<UInt64>(0)
    private let recordItem = Atomic<UInt>(0)
    private let recordMode = Atomic<UInt>(0)
    private let inspecting = Atomic<Bool>(false)
    private let inspectionLock = Locked(())
    /// Watches of this loop asleep without a timeout (`HangWatcher.park`): only while there is one
    /// does a loop leaving its wait look at its watches' bells.
    let parkedWatches = Atomic<Int>(0)
    /// Set when a watch is added, so the loop refreshes `cachedWatchers`.
    private let watchersChanged = Atomic<Bool>(false)

    // MARK: Loop thread only

    /// The last value written to `progress`.
    @exclusivity(unchecked) private var counter: UInt64 = 1
    /// The last record published (restored when a nested callout returns).
    @exclusivity(unchecked) private var current = CalloutRecord.none
    @exclusivity(unchecked) private var cachedWatchers: [HangWatchWaker] = []
    /// Nesting depth of run invocations, kept whether or not anything watches (a watch may
    /// begin inside a nested run).
    @exclusivity(unchecked) var invocationDepth = 0
    /// The mode of the innermost running invocation (modes are never removed from a loop, so
    /// the pointer stays valid while the loop lives), kept whether or not anything watches.
    @exclusivity(unchecked) var mode: Unmanaged<ModeState>?

    /// The mode a callout runs in. Loop thread only.
    var calloutMode: ThreadRunLoop.Mode { mode?.takeUnretainedValue().mode ?? .default }

    // MARK: - Configuration (any thread)

    /// Sets or removes the slow-callout handler and updates `flags`. Any thread; a lock.
    func setSlowCalloutHandler(_ slowCallouts: (Int64, @Sendable (ThreadRunLoop.Callout) -> Void)?,
                               flags: borrowing Atomic<UInt8>) {
        configuration.withLock { configuration in
            configuration.slowCallouts = slowCallouts
            slowThreshold.store(slowCallouts?.0 ?? .max, ordering: .relaxed)
            flags.store(Self.flags(configuration), ordering: .releasing)
        }
    }

    /// Starts publishing for `watcher`. On the first watch, what was published before (if an
    /// earlier watch ended) is marked stale. Any thread; a lock.
    func add(_ watcher: HangWatchWaker, flags: borrowing Atomic<UInt8>) {
        configuration.withLock { configuration in
            if configuration.watchers.isEmpty {
                progress.store(Self.unknownProgress, ordering: .sequentiallyConsistent)
                recordSequence.bitwiseOr(Self.staleRecord, ordering: .sequentiallyConsistent)
            }
            configuration.watchers.append(watcher)
            // Before the watch thread's first look at `progress`: a loop that does not see this
            // when it wakes has published a busy `progress` the watch will see (Dekker).
            watchersChanged.store(true, ordering: .sequentiallyConsistent)
            flags.store(Self.flags(configuration), ordering: .sequentiallyConsistent)
            if ProcessBarrier.isAvailable { ProcessBarrier.heavy() }
        }
    }

    /// Stops publishing for `watcher`. Any thread; a lock.
    func remove(_ watcher: HangWatchWaker, flags: borrowing Atomic<UInt8>) {
        configuration.withLock { configuration in
            configuration.watchers.removeAll { $0 === watcher }
            watchersChanged.store(true, ordering: .sequentiallyConsistent)
            flags.store(Self.flags(configuration), ordering: .releasing)
        }
    }

    /// Starts or stops recording this loop's callouts for `runloopctl trace`. Any thread; a lock.
    func setTraced(_ traced: Bool, flags: borrowing Atomic<UInt8>) {
        configuration.withLock { configuration in
            configuration.traced = traced
            flags.store(Self.flags(configuration), ordering: .releasing)
        }
    }

    private static func flags(_ configuration: Configuration) -> UInt8 {
        timingFlags(configuration) | (configuration.traced ? HealthFlags.traced : 0)
    }

    private static func timingFlags(_ configuration: Configuration) -> UInt8 {
        let timed = (configuration.slowCallouts == nil ? 0 : HealthFlags.slowCallouts)
            | (configuration.watchers.isEmpty ? 0 : HealthFlags.watched | (ProcessBarrier.isAvailable ? HealthFlags.lightBarrier : 0))
        // Below the floor nearly every callout of a busy loop could be slow, and converting its
        // ticks costs a clock read more than timing it with the clock.
        guard timed != 0, CycleCounter.isUsable,
              configuration.slowCallouts.map({ $0.threshold >= cycleCounterFloor }) ?? true else { return timed }
        _ = CycleCounter.anchor
        return timed | HealthFlags.cycleCounter
    }

    /// The least slow-callout threshold timed in ticks: 1 ms, in nanoseconds.
    static let cycleCounterFloor: Int64 = 1_000_000

    // MARK: - Slow callouts (loop thread)

    /// Reports a timed callout, which just returned, to the slow-callout handler if it ran at
    /// least the threshold.
    @inline(__always)
    func reportIfSlow(_ kind: ThreadRunLoop.Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32?,
                      started: CalloutStamp) {
        let threshold = slowThreshold.load(ordering: .relaxed)
        guard started.mayHaveLasted(threshold) else { return }
        let (start, end) = started.spanUntilNow()
        let elapsed = start.nanoseconds(to: end)
        guard elapsed >= threshold else { return }
        report(kind, item, msgid: msgid, started: start, elapsed: elapsed)
    }

    @inline(never)
    private func report(_ kind: ThreadRunLoop.Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32?,
                        started: LoopInstant, elapsed: Int64) {
        guard let handler = configuration.withLock({ $0.slowCallouts?.handler }) else { return }
        handler(ThreadRunLoop.Callout(kind: kind, label: item?.label, mode: calloutMode, msgid: msgid,
                                      started: started.instant, duration: .nanoseconds(elapsed)))
    }

    // MARK: - Progress (loop thread, while watched)

    /// The loop is busy: a pass or a nested invocation began. Inline: once per pass.
    @inline(__always)
    func markBusy() {
        progress.store(nextBusyCount(), ordering: .releasing)
    }

    /// The next even (busy) value of `progress`.
    @inline(__always)
    private func nextBusyCount() -> UInt64 {
        counter += counter & 1 == 0 ? 2 : 1
        return counter
    }

    /// The loop is busy: it left its wait or began its outermost invocation. Only then can a watch
    /// be parked, so only then is the store one side of a Dekker pair (`lightBarrier`:
    /// `ProcessBarrier.light()`, else sequentially consistent) and the watches looked at.
    func markWoke(lightBarrier: Bool) {
        let busy = nextBusyCount()
        if lightBarrier {
            progress.store(busy, ordering: .releasing)
            ProcessBarrier.light()
        } else {
            progress.store(busy, ordering: .sequentiallyConsistent)
        }
        if watchersChanged.load(ordering: .sequentiallyConsistent) {
            watchersChanged.store(false, ordering: .sequentiallyConsistent)
            cachedWatchers = configuration.withLock { $0.watchers }
        }
        // The other side of `HangWatcher.park`'s Dekker pair: it counts itself here, then reads
        // `progress`. Without a parked watch a wake-up costs this one load.
        guard parkedWatches.load(ordering: .sequentiallyConsistent) != 0 else { return }
        for watcher in cachedWatchers { watcher.loopBecameBusy() }
    }

    /// The loop goes to sleep in its wait, or its outermost invocation ended.
    func markIdle() {
        counter += counter & 1 == 0 ? 1 : 2
        progress.store(counter, ordering: .releasing)
    }

    // MARK: - The callout in progress (loop thread, while watched)

    /// Publishes the callout the loop enters; returns the record to restore when it returns.
    func enterCallout(_ kind: ThreadRunLoop.Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32?,
                      started: CalloutStamp) -> CalloutRecord {
        let previous = current
        current = CalloutRecord(kind: kind, msgid: msgid, started: started,
                                item: item.map { UInt(bitPattern: ObjectIdentifier($0)) } ?? 0,
                                mode: mode.map { UInt(bitPattern: $0.toOpaque()) } ?? 0)
        publish(current)
        return previous
    }

    /// Publishes the record of the callout the loop returns to (or none), then waits for a watch
    /// that is reading the label of the callout it left, whose item the caller is about to let go of.
    func leaveCallout(restoring previous: CalloutRecord, lightBarrier: Bool) {
        current = previous
        // A callout that returned is progress (§3.56), however long the pass it belongs to.
        progress.store(nextBusyCount(), ordering: .releasing)
        // The record's stores are one side of the Dekker pair with `inspecting`.
        if lightBarrier {
            publish(current, sequentiallyConsistent: false)
            ProcessBarrier.light()
        } else {
            publish(current, sequentiallyConsistent: true)
        }
        if inspecting.load(ordering: .sequentiallyConsistent) { inspectionLock.withLock { _ in } }
    }

    private func publish(_ record: CalloutRecord, sequentiallyConsistent: Bool = false) {
        let sequence = (recordSequence.load(ordering: .relaxed) & ~Self.staleRecord) | 1
        // A release fence is enough to order the odd sequence before the fields.
        if sequentiallyConsistent {
            recordSequence.store(sequence, ordering: .sequentiallyConsistent)
        } else {
            recordSequence.store(sequence, ordering: .relaxed)
            atomicMemoryFence(ordering: .releasing)
        }
        recordKind.store(record.kindBits, ordering: .relaxed)
        recordStarted.store(record.startedBits, ordering: .relaxed)
        recordItem.store(record.item, ordering: .relaxed)
        recordMode.store(record.mode, ordering: .relaxed)
        recordSequence.store(sequence &+ 1, ordering: .releasing)
    }

    // MARK: - Reading (a watch's thread)

    /// The callout the loop is inside, with its duration until now; nil when it is in no
    /// callout, or the record could not be read consistently (the loop was preempted while
    /// writing it) or predates the watch. Any thread; a lock, and the item's label lock.
    func calloutInProgress() -> ThreadRunLoop.Callout? {
        let snapshot: (CalloutRecord, AnyObject?, ThreadRunLoop.Mode)? = inspectionLock.withLock { _ in
            inspecting.store(true, ordering: .sequentiallyConsistent)
            if ProcessBarrier.isAvailable { ProcessBarrier.heavy() }
            defer { inspecting.store(false, ordering: .releasing) }
            for attempt in 0..<3 {
                if attempt > 0 { sched_yield() }
                let before = recordSequence.load(ordering: .sequentiallyConsistent)
                if before & Self.staleRecord != 0 { return nil }
                if before & 1 == 1 { continue }
                let record = CalloutRecord(kindBits: recordKind.load(ordering: .relaxed),
                                           startedBits: recordStarted.load(ordering: .relaxed),
                                           item: recordItem.load(ordering: .relaxed),
                                           mode: recordMode.load(ordering: .relaxed))
                atomicMemoryFence(ordering: .acquiring)
                guard recordSequence.load(ordering: .relaxed) == before else { continue }
                guard record.kind != nil else { return nil }
                // Consistent, and the loop cannot let go of the item before this lock is released.
                let item = UnsafeRawPointer(bitPattern: record.item).map { Unmanaged<AnyObject>.fromOpaque($0).takeUnretainedValue() }
                let mode = UnsafeRawPointer(bitPattern: record.mode).map {
                    Unmanaged<ModeState>.fromOpaque($0).takeUnretainedValue().mode
                } ?? .default
                return (record, item, mode)
            }
            return nil
        }
        guard let (record, item, mode) = snapshot, let kind = record.kind else { return nil }
        let (started, now) = record.started.spanUntilNow()
        return ThreadRunLoop.Callout(kind: kind, label: (item as? any CalloutItem)?.label, mode: mode,
                                     msgid: record.msgid, started: started.instant,
                                     duration: .nanoseconds(max(0, started.nanoseconds(to: now))))
    }
}

/// A callout as the loop publishes it for hang watches: plain words, no references.
struct CalloutRecord {
    var kindBits: UInt64
    var startedBits: UInt64
    var item: UInt
    var mode: UInt

    static let none = CalloutRecord(kindBits: 0, startedBits: 0, item: 0, mode: 0)
    /// Set in `kindBits` when `startedBits` is a tick count.
    private static let cyclesBit: UInt64 = 1 << 9

    init(kindBits: UInt64, startedBits: UInt64, item: UInt, mode: UInt) {
        self.kindBits = kindBits
        self.startedBits = startedBits
        self.item = item
        self.mode = mode
    }

    init(kind: ThreadRunLoop.Callout.Kind, msgid: UInt32?, started: CalloutStamp, item: UInt, mode: UInt) {
        var bits = UInt64(kind.code)
        if let msgid { bits |= 1 << 8 | UInt64(msgid) << 32 }
        if started.isCycles { bits |= Self.cyclesBit }
        self.init(kindBits: bits, startedBits: started.value, item: item, mode: mode)
    }

    var kind: ThreadRunLoop.Callout.Kind? { .init(code: UInt8(truncatingIfNeeded: kindBits)) }
    var msgid: UInt32? { kindBits & 1 << 8 == 0 ? nil : UInt32(truncatingIfNeeded: kindBits >> 32) }
    var started: CalloutStamp { CalloutStamp(value: startedBits, isCycles: kindBits & Self.cyclesBit != 0) }
}

extension ThreadRunLoop.Callout.Kind {
    /// The kind in a `CalloutRecord` (0 stands for "no callout").
    var code: UInt8 {
        switch self {
        case .source: 1
        case .timer: 2
        case .observer: 3
        case .port: 4
        case .fileDescriptor: 5
        case .block: 6
        case .job: 7
        case .mainQueue: 8
        case .signal: 9
        case .processExit: 10
        }
    }

    init?(code: UInt8) {
        switch code {
        case 1: self = .source
        case 2: self = .timer
        case 3: self = .observer
        case 4: self = .port
        case 5: self = .fileDescriptor
        case 6: self = .block
        case 7: self = .job
        case 8: self = .mainQueue
        case 9: self = .signal
        case 10: self = .processExit
        default: return nil
        }
    }
}

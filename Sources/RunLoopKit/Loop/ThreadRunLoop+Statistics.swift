import Synchronization

extension ThreadRunLoop {
    /// A loop's counters since it was created, cheap enough to stay on: the loop's own thread
    /// is their only writer, so each count is a plain load and store (no atomic read-modify-write),
    /// readable from any thread.
    public struct Statistics: Sendable, Hashable, CustomStringConvertible {
        /// Passes run, in every mode and nested invocation (the iteration of Guarantees §3.2).
        public var passes: UInt64 = 0
        /// Times the loop came back from sleeping in the kernel (for a Source1, a wake-up, a
        /// timer or a deadline).
        public var wakeUps: UInt64 = 0
        /// Sources handled: Source0 callouts, port messages delivered, fd-source callouts,
        /// `perform` blocks and executor jobs run, main-queue drains.
        public var handledSources: UInt64 = 0
        /// Timer callouts.
        public var timerFires: UInt64 = 0
        /// Callouts the loop timed for a slow-callout handler or a `HangWatch` (two reads of the
        /// tick counter or the clock each); zero while neither is set.
        public var timedCallouts: UInt64 = 0
        /// Callouts that returned, of every kind: a loop whose count moves is making progress,
        /// however long its pass (Guarantees §3.56: the watchdog and hang watches count these).
        public var callouts: UInt64 = 0

        /// Creates zeroed statistics. Any thread; free.
        public init() {}

        /// One line with every counter. Any thread.
        public var description: String {
            "passes \(passes), wake-ups \(wakeUps), handled sources \(handledSources), timer fires \(timerFires), "
                + "timed callouts \(timedCallouts), callouts \(callouts)"
        }
    }

    /// The loop's counters. Any thread; six relaxed atomic loads (not one snapshot: a counter
    /// read while the loop runs may be a pass ahead of another).
    public var statistics: Statistics {
        var statistics = Statistics()
        statistics.passes = counters.passes.load(ordering: .relaxed)
        statistics.wakeUps = counters.wakeUps.load(ordering: .relaxed)
        statistics.handledSources = counters.handledSources.load(ordering: .relaxed)
        statistics.timerFires = counters.timerFires.load(ordering: .relaxed)
        statistics.timedCallouts = counters.timedCallouts.load(ordering: .relaxed)
        statistics.callouts = counters.callouts.load(ordering: .relaxed)
        return statistics
    }
}

/// The storage of `ThreadRunLoop.Statistics`: written by the loop's thread only.
final class LoopCounters: Sendable {
    let passes = Atomic<UInt64>(0)
    let wakeUps = Atomic<UInt64>(0)
    let handledSources = Atomic<UInt64>(0)
    let timerFires = Atomic<UInt64>(0)
    let timedCallouts = Atomic<UInt64>(0)
    let callouts = Atomic<UInt64>(0)

    /// Adds `count` to `counter`. Loop thread only: a single writer needs no read-modify-write.
    @inline(__always)
    static func add(_ count: Int, to counter: borrowing Atomic<UInt64>) {
        counter.store(counter.load(ordering: .relaxed) &+ UInt64(truncatingIfNeeded: count), ordering: .relaxed)
    }
}

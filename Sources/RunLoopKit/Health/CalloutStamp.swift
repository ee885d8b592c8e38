/// When a timed callout began, on the timeline the loop times callouts with: the clock's
/// nanoseconds, or the CPU's tick count (`HealthFlags.cycleCounter`, see `CycleCounter`), which
/// is converted only when a callout may be reported. Made on the loop's thread; a hang watch
/// reads one from the published record.
struct CalloutStamp {
    var value: UInt64
    var isCycles: Bool

    /// Now, on the chosen timeline. Any thread; an rdtsc, or a clock read.
    @inline(__always)
    static func now(cycles: Bool) -> CalloutStamp {
        cycles ? CalloutStamp(value: CycleCounter.now, isCycles: true)
            : CalloutStamp(value: UInt64(bitPattern: LoopInstant.now.nanoseconds), isCycles: false)
    }

    /// Whether `nanoseconds` may have passed since this stamp. Always true for a clock stamp; for
    /// a tick count, whether as many ticks passed as the slowest counter makes in that time, so
    /// that a callout that was surely shorter costs no clock read. Any thread; free, or an rdtsc.
    @inline(__always)
    func mayHaveLasted(_ nanoseconds: Int64) -> Bool {
        !isCycles || CycleCounter.now &- value >= UInt64(clamping: nanoseconds) / CycleCounter.slowestTickNanoseconds
    }

    /// The span from this stamp until now, as the clock's instants: a start no later than the
    /// stamp's moment, and now. Any thread; a clock read (and two rdtsc for a tick count).
    func spanUntilNow() -> (started: LoopInstant, now: LoopInstant) {
        if isCycles { return CycleCounter.span(since: value) }
        return (LoopInstant(nanoseconds: Int64(bitPattern: value)), .now)
    }
}

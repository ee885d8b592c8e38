import CRunLoopKit

/// The CPU's time-stamp counter, where the kernel itself keeps time with it: an rdtsc costs
/// about 13 ns where a vDSO clock read costs 32 (measured on a KVM guest), and loop health reads
/// one at each end of every callout. Ticks become nanoseconds only for a report, measured
/// against the clock, never assumed from a nominal frequency.
///
/// **Why the clocksource decides.** The kernel makes "tsc" its clocksource only after checking
/// that the counter is invariant (it ticks at one rate whatever the CPU's frequency or sleep
/// state) and synchronised across CPUs, so a thread that moves to another CPU during a callout
/// still reads one timeline. Elsewhere (another clocksource, another architecture) loops time
/// callouts with the clock, as `isUsable` says.
///
/// **Converting.** `anchor` pairs a tick count with a clock reading, once; a report pairs them
/// again. A tick lasts at most the clock's advance over the fewest ticks that can separate the
/// two pairings, so a span converted at that rate is never shorter than it was.
enum CycleCounter {
    /// Whether callouts may be timed in ticks: x86-64 with the kernel's clocksource "tsc".
    /// Read once per process (a sysfs file); any thread.
    static let isUsable: Bool = {
        #if arch(x86_64)
        return FileDescriptor.firstLine(ofFile: "/sys/devices/system/clocksource/clocksource0/current_clocksource",
                                        capacity: 16) == "tsc"
        #else
        return false
        #endif
    }()

    /// Now, in ticks. Any thread; one rdtsc.
    @inline(__always)
    static var now: UInt64 { crlk_cycle_count() }

    /// The longest a tick is taken to last while too little time has passed since `anchor` to
    /// measure it: 4 ns, a 250 MHz counter (an invariant TSC runs at the CPU's nominal rate, in GHz).
    static let slowestTickNanoseconds: UInt64 = 4

    /// A clock reading and the tick counts read just before and just after it.
    struct Pairing {
        var ticksBefore: UInt64
        var clock: LoopInstant
        var ticksAfter: UInt64

        /// Reads one, again if the thread was preempted between the reads (they are then far
        /// apart and would loosen every conversion against it). Any thread; a clock read and
        /// two rdtsc, rarely more.
        static func now() -> Pairing {
            var pairing: Pairing
            var attempts = 0
            repeat {
                let before = CycleCounter.now
                let clock = LoopInstant.now
                pairing = Pairing(ticksBefore: before, clock: clock, ticksAfter: CycleCounter.now)
                attempts += 1
            } while pairing.ticksAfter &- pairing.ticksBefore > maximumSkew && attempts < 8
            return pairing
        }

        /// Ticks a clock read may take before the pairing is read again.
        static let maximumSkew: UInt64 = 2048
    }

    /// The calibration's first pairing, read when loop health first uses the counter (before
    /// any loop times a callout with it). Any thread.
    static let anchor = Pairing.now()

    /// The span from `ticks` (read earlier on this timeline) until now, as the clock's instants:
    /// a start no later than the true one, and now. Any thread; a clock read and two rdtsc.
    static func span(since ticks: UInt64) -> (started: LoopInstant, now: LoopInstant) {
        let now = Pairing.now()
        // A counter read on another CPU a few ticks ahead of this one's is no time at all.
        let elapsedTicks = Int64(bitPattern: now.ticksAfter &- ticks) < 0 ? 0 : now.ticksAfter &- ticks
        let nanoseconds: UInt64
        let measuredTicks = now.ticksBefore &- anchor.ticksAfter
        // `ticks` was read after `anchor` (the anchor is read before any loop may time a
        // callout in ticks), so the span is at most the measured ticks and one skew. Once the
        // pairings are 8 skews apart, the rate's bound overstates it by at most 2.25 skews of
        // ticks (a few µs). Before that the span is under 18,432 ticks, which the slowest tick
        // keeps under 74 µs: less than the 1 ms threshold floor, so it reports nothing early.
        if Int64(bitPattern: measuredTicks) > Int64(Pairing.maximumSkew) * 8 {
            // At most the clock's advance over the fewest ticks between the pairings, and 1/512
            // more: NTP slews the clock by up to 500 ppm either way, so the rate over the span
            // and over the pairings may differ by 1,000 ppm.
            let longestTick = Double(anchor.clock.nanoseconds(to: now.clock)) / Double(measuredTicks)
            nanoseconds = UInt64(min(Double(Int64.max), Double(elapsedTicks) * longestTick * (1 + 1 / 512)))
        } else {
            let (product, overflow) = elapsedTicks.multipliedReportingOverflow(by: slowestTickNanoseconds)
            nanoseconds = overflow ? .max : product
        }
        return (now.clock.advanced(byNanoseconds: -Int64(clamping: nanoseconds)), now.clock)
    }
}

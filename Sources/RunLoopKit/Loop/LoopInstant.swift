import CRunLoopKit

/// A point on ContinuousClock as whole nanoseconds of the clock's own count, for the loop's
/// own bookkeeping. `ContinuousClock.Instant` lives in a resilient library, so every copy or
/// comparison of an optional one goes through runtime witness calls, and its `.now` costs a
/// runtime call and 128-bit Duration arithmetic; the loop reads the clock and compares
/// deadlines on every pass, so it converts instants once, at the API boundary, and reads the
/// clock itself.
///
/// On Linux ContinuousClock reads CLOCK_BOOTTIME and an instant is that reading as a
/// `Duration` (Swift's Concurrency/Clock.cpp), so the count is CLOCK_BOOTTIME's nanoseconds and
/// converting either way is exact; the loop's tests check that `LoopInstant.now` falls between
/// two `ContinuousClock.now` readings taken around it.
///
/// Every conversion and every sum or difference saturates at the Int64 bounds (about 292
/// years either side of boot) instead of wrapping or trapping: callers pass "distant past" and
/// "distant future" instants (`.now ± .seconds(Int64.max)`), and a wrap would turn one into
/// the other — a timer due centuries ago would put the loop to sleep for centuries.
/// A value type; any thread. Each operation costs a few integer instructions.
struct LoopInstant: Comparable, Sendable {
    var nanoseconds: Int64

    init(_ instant: ContinuousClock.Instant) {
        nanoseconds = unsafeBitCast(instant, to: Duration.self).nanoseconds
    }

    init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    /// Now, from the vDSO: a few dozen instructions.
    static var now: LoopInstant { LoopInstant(nanoseconds: crlk_continuous_now_ns()) }

    /// The same point as a clock instant (exact: both count whole nanoseconds).
    var instant: ContinuousClock.Instant { unsafeBitCast(Duration.nanoseconds(nanoseconds), to: ContinuousClock.Instant.self) }

    /// `delta` nanoseconds later (earlier when negative), saturating.
    func advanced(byNanoseconds delta: Int64) -> LoopInstant {
        LoopInstant(nanoseconds: nanoseconds.saturatingAdding(delta))
    }

    /// `duration` later (earlier when negative), saturating.
    func advanced(by duration: Duration) -> LoopInstant {
        advanced(byNanoseconds: duration.nanoseconds)
    }

    /// The nanoseconds from this instant to `other` (negative when `other` is earlier), saturating.
    func nanoseconds(to other: LoopInstant) -> Int64 {
        other.nanoseconds.saturatingSubtracting(nanoseconds)
    }

    /// The nanoseconds from `now` until this instant, zero if it has passed.
    var remainingNanoseconds: Int64 {
        max(0, LoopInstant.now.nanoseconds(to: self))
    }

    static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

extension Duration {
    /// Whole nanoseconds, truncated toward zero and saturating at the Int64 bounds
    /// (`components` would trap past Int64.max seconds, and scaling its seconds could overflow).
    var nanoseconds: Int64 {
        Int64(clamping: attoseconds / 1_000_000_000)
    }
}

extension Int64 {
    /// `self + other`, clamped to the type's bounds.
    func saturatingAdding(_ other: Int64) -> Int64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : sum
    }

    /// `self - other`, clamped to the type's bounds.
    func saturatingSubtracting(_ other: Int64) -> Int64 {
        let (difference, overflow) = subtractingReportingOverflow(other)
        return overflow ? (other < 0 ? .max : .min) : difference
    }

    /// `self * other`, clamped to the type's bounds.
    func saturatingMultiplied(by other: Int64) -> Int64 {
        let (product, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self < 0) == (other < 0) ? .max : .min) : product
    }
}

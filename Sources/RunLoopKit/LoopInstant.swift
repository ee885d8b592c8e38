/// A point on ContinuousClock as whole nanoseconds since a fixed reference, for the loop's
/// own bookkeeping. `ContinuousClock.Instant` lives in a resilient library, so every copy or
/// comparison of an optional one goes through runtime witness calls; the loop passes its
/// deadlines around on every pass, so it converts them once, at the API boundary.
struct LoopInstant: Comparable, Sendable {
    var nanoseconds: Int64

    /// The reference point; any instant works, this one is simply the first one asked for.
    private static let reference = ContinuousClock.now

    init(_ instant: ContinuousClock.Instant) {
        nanoseconds = Self.reference.duration(to: instant).nanoseconds
    }

    static var now: LoopInstant { LoopInstant(.now) }

    /// The nanoseconds from `now` until this instant, zero if it has passed.
    var remainingNanoseconds: Int64 {
        max(0, nanoseconds &- LoopInstant.now.nanoseconds)
    }

    static func < (lhs: LoopInstant, rhs: LoopInstant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }
}

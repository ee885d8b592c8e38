import Synchronization

/// A timer that fires on the loop's thread. One-shot when `interval` is zero (invalid once it
/// has fired), repeating otherwise: a repeating timer that missed fire dates fires once and
/// moves to the next date on its original grid after now, never a burst of catch-up fires.
///
/// `tolerance` lets the loop fire the timer up to that much late so that it can share one
/// wake-up with other timers. A timer belongs to one loop at most (in any number of its modes).
public final class RunLoopTimer: Sendable, SingleLoopItem, CustomStringConvertible {
    private struct State {
        var fireDate: ContinuousClock.Instant {
            didSet { fireInstant = LoopInstant(fireDate) }
        }
        /// `fireDate` converted (saturating) once per write, not on every pass that sleeps.
        var fireInstant: LoopInstant
        var tolerance: Duration
        var firing = false
        /// Bumped by every `fireDate` write, so a handler that reschedules its own timer wins
        /// over the automatic grid advance.
        var generation: UInt64 = 0
    }

    /// The time between fires of a repeating timer; zero for a one-shot timer. Any thread; free.
    public let interval: Duration
    private let handler: @Sendable (RunLoopTimer) -> Void
    private let state: Locked<State>
    let membership = LoopMembership()

    /// A timer first firing at `fireAt`, then every `interval` (zero: once). Any thread.
    public init(fireAt: ContinuousClock.Instant, interval: Duration = .zero,
                tolerance: Duration = .zero,
                handler: @escaping @Sendable (RunLoopTimer) -> Void) {
        precondition(interval >= .zero, "RunLoopTimer interval must not be negative (got \(interval))")
        self.interval = interval
        self.handler = handler
        state = Locked(State(fireDate: fireAt, fireInstant: LoopInstant(fireAt), tolerance: max(tolerance, .zero)))
    }

    /// A timer first firing `interval` from now; repeating every `interval` when `repeats`. Any thread.
    public convenience init(interval: Duration, repeats: Bool,
                            handler: @escaping @Sendable (RunLoopTimer) -> Void) {
        self.init(fireAt: .now.advanced(by: interval), interval: repeats ? interval : .zero, handler: handler)
    }

    /// The next time the timer fires. Setting it reschedules the timer; from another thread it
    /// also wakes the loop so a loop already asleep re-arms its wait. Any thread; a lock.
    public var fireDate: ContinuousClock.Instant {
        get { state.withLock { $0.fireDate } }
        set {
            state.withLock {
                $0.fireDate = newValue
                $0.generation &+= 1
            }
            membership.loop?.timersDidChange()
        }
    }

    /// How late the timer may fire so the loop can coalesce wake-ups. Any thread; a lock.
    public var tolerance: Duration {
        get { state.withLock { $0.tolerance } }
        set {
            state.withLock { $0.tolerance = max(newValue, .zero) }
            membership.loop?.timersDidChange()
        }
    }

    /// Stops the timer for good and removes it from its loop (which then returns `.finished`
    /// if this was the mode's last item). Idempotent. Any thread.
    public func invalidate() {
        invalidateMembership()
    }

    /// False once invalidated (or, for a one-shot timer, once it has fired). Any thread.
    public var isValid: Bool { membership.isValid }

    /// A name for the timer's callouts in loop-health reports (`ThreadRunLoop.Callout.label`),
    /// e.g. "status". Read only when a callout is reported, so it costs the loop nothing otherwise.
    /// Any thread; a lock.
    public var label: String? {
        get { membership.label }
        set { membership.label = newValue }
    }

    /// The fire date, interval, tolerance and validity, for logs. Any thread; a lock and the string.
    public var description: String {
        let (date, tolerance) = state.withLock { ($0.fireInstant, $0.tolerance) }
        let firesIn = Duration.nanoseconds(LoopInstant.now.nanoseconds(to: date))
        return "RunLoopTimer(fires in: \(firesIn), interval: \(interval), tolerance: \(tolerance), valid: \(isValid))"
    }

    // MARK: - Loop side

    /// The fire date and the latest wake-up for it (fire date + tolerance, saturating); nil
    /// when the timer cannot fire (invalid, or firing further up the stack of a nested run).
    /// Loop thread; a lock.
    func schedule() -> (fire: LoopInstant, wake: LoopInstant)? {
        guard isValid else { return nil }
        return state.withLock { state in
            state.firing ? nil : (state.fireInstant, state.fireInstant.advanced(by: state.tolerance))
        }
    }

    func isDue(at now: ContinuousClock.Instant) -> Bool {
        isValid && state.withLock { !$0.firing && $0.fireDate <= now }
    }

    /// Runs the handler, then invalidates a one-shot timer or advances a repeating one on its grid.
    /// Runs the handler if the timer is due and not already firing; returns whether it ran.
    @discardableResult
    func fire(now: ContinuousClock.Instant) -> Bool {
        let claimed: (LoopInstant, UInt64)? = state.withLock { state in
            guard !state.firing, state.fireDate <= now else { return nil }
            state.firing = true
            return (state.fireInstant, state.generation)
        }
        guard let (firedDate, generation) = claimed, isValid else {
            if claimed != nil { state.withLock { $0.firing = false } }
            return false
        }
        handler(self)
        let oneShot = interval == .zero
        state.withLock { state in
            state.firing = false
            guard !oneShot, state.generation == generation else { return }
            state.fireDate = Self.nextGridDate(after: firedDate, interval: interval, now: .now).instant
        }
        if oneShot { invalidate() }
        return true
    }

    /// The first date `start + k·interval` (k ≥ 1) that is after `now`, in saturating
    /// nanoseconds. An interval under a nanosecond steps by one. When `start` lies beyond the
    /// saturation bound (centuries ago) the grid cannot be computed and the next date is
    /// `now + interval`, as for a timer that was just added.
    static func nextGridDate(after start: LoopInstant, interval: Duration, now: LoopInstant) -> LoopInstant {
        let step = max(interval.nanoseconds, 1)
        let next = start.advanced(byNanoseconds: step)
        guard next <= now else { return next }
        let skipped = (next.nanoseconds(to: now) / step).saturatingAdding(1)
        let onGrid = next.advanced(byNanoseconds: step.saturatingMultiplied(by: skipped))
        return onGrid > now ? onGrid : now.advanced(byNanoseconds: step)
    }

    static var itemKind: WritableKeyPath<ItemSet, [RunLoopTimer]> { \.timers }
}

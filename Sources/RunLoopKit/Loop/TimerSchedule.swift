/// When the timers of one mode next need the loop: the earliest fire date (is any timer due?)
/// and the earliest fire date + tolerance (how long may the loop sleep?).
///
/// CF keeps each mode's timers sorted by fire date so that a pass looks at one; here the two
/// minima are kept instead, computed once after the mode's timers or their dates change
/// (`ThreadRunLoop.timerEpoch`, the snapshot's generation), so that a pass with 1,000 idle
/// timers costs what a pass with one does. The timers are looked at one by one only when one
/// is due. A value owned by `ModeState`; loop thread only.
struct TimerSchedule {
    /// The snapshot generation and timer epoch it was computed for.
    private var generation: UInt64 = .max
    private var epoch: UInt64 = .max
    /// The earliest fire date of a timer that can fire; nil when none can.
    private(set) var earliestFire: LoopInstant?
    /// The latest the loop may sleep to: the earliest fire date + tolerance.
    private var earliestWake: LoopInstant?

    init() {}

    /// Computes the schedule of `timers`; a lock per timer.
    init(_ timers: [RunLoopTimer], generation: UInt64, epoch: UInt64) {
        self.generation = generation
        self.epoch = epoch
        for timer in timers {
            guard let (fire, wake) = timer.schedule() else { continue }
            if earliestFire.map({ fire < $0 }) ?? true { earliestFire = fire }
            if earliestWake.map({ wake < $0 }) ?? true { earliestWake = wake }
        }
    }

    func isCurrent(generation: UInt64, epoch: UInt64) -> Bool {
        self.generation == generation && self.epoch == epoch
    }

    /// When a sleeping loop must wake for its timers: now when one is already due (tolerance is
    /// for coalescing future wake-ups, not for delaying a timer that is already late), else the
    /// earliest fire date + tolerance; nil when no timer can fire.
    func wakeInstant(now: LoopInstant) -> LoopInstant? {
        guard let earliestFire else { return nil }
        return earliestFire <= now ? now : earliestWake
    }
}

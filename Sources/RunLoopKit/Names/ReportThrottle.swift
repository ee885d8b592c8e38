/// Keeps a flood of refused peers from becoming a flood of reports: in each interval the first
/// `burst` reports go out in full; the rest are counted, and the first report after the
/// interval carries the count (`TransportReport.suppressed`). No timer: a flood that stops
/// leaves its last count to the next report, whenever that comes.
final class ReportThrottle: Sendable {
    /// Reports in full per interval.
    static let defaultBurst = 10
    /// The interval.
    static let defaultInterval: Duration = .seconds(10)

    private struct State {
        var burst = ReportThrottle.defaultBurst
        var interval = ReportThrottle.defaultInterval
        var started: ContinuousClock.Instant?
        var passed = 0
        var suppressed = 0
        /// Every report offered, passed or left out.
        var offered = 0
    }

    private let state = Locked(State())

    /// `report` as it should go out, or nil when it is left out (counted). Any thread; a lock
    /// and a clock read.
    func admit(_ report: MessagePort.TransportReport) -> MessagePort.TransportReport? {
        let now = ContinuousClock.now
        return state.withLock { state in
            state.offered += 1
            if let started = state.started, now - started < state.interval {
                guard state.passed < state.burst else {
                    state.suppressed += 1
                    return nil
                }
                state.passed += 1
                return report
            }
            var first = report
            first.suppressed = state.suppressed
            state.started = now
            state.passed = 1
            state.suppressed = 0
            return first
        }
    }

    /// Every report offered so far, passed or left out (tests). Any thread; a lock.
    var offered: Int { state.withLock { $0.offered } }

    /// Changes the burst and interval (tests). Any thread; a lock.
    func configure(burst: Int, interval: Duration) {
        state.withLock { state in
            state.burst = burst
            state.interval = interval
        }
    }
}

extension MessagePort {
    /// Lets every report of this port's published name through, none rate-limited: for the fuzz
    /// targets, which check each refusal's report. Package-visible; any thread; a lock.
    package func reportEveryRefusal() {
        lock.withLock { state.publication?.reports }?.configure(burst: .max, interval: .zero)
    }
}

import CSystemd
import RunLoopKit

/// Pings the systemd watchdog (`WATCHDOG=1`) from a run loop, at half the timeout that
/// `sd_watchdog_enabled(3)` reports (`WatchdogSec=` in the unit, passed as `WATCHDOG_USEC`).
///
/// The pings come from a repeating `RunLoopTimer` on the loop you add the keep-alive to, so
/// they stop when that loop stops turning: a wedged main loop is what gets the service
/// restarted. When the watchdog is off (no `WATCHDOG_USEC`, a `WATCHDOG_PID` naming another
/// process, or no `NOTIFY_SOCKET` to send pings to) the keep-alive has no timer and every
/// method is a no-op.
///
/// ```swift
/// let watchdog = WatchdogKeepAlive()
/// watchdog.add(to: .main)          // common modes: pings continue in any common mode
/// ```
///
/// **The watchdog of every loop.** A daemon's other loops — resident worker threads — can be
/// wedged while the main loop turns. Give the keep-alive those loops too, and each ping is sent
/// only when every one of them has completed a pass, or is asleep in its wait, since the last
/// ping: one stuck loop stops the pings, and systemd restarts the service after its timeout.
///
/// ```swift
/// let watchdog = WatchdogKeepAlive(watching: [.main, worker.runLoop]) { stuck in
///     log("no WATCHDOG=1: \(stuck.map(\.threadName)) made no progress")
/// }
/// watchdog.add(to: .main)
/// ```
///
/// Watching costs the loops nothing: each ping reads every watched loop's pass count and
/// `isWaiting` (a few atomic loads), on the keep-alive's loop.
public final class WatchdogKeepAlive: Sendable {
    /// The watchdog timeout systemd expects pings within, or nil when the watchdog is off
    /// (including when there is no `NOTIFY_SOCKET`: pings would go nowhere).
    /// Any thread; free (read once by `init`).
    public let timeout: Duration?

    /// The ping period (half of `timeout`), or nil when the watchdog is off. Any thread; free.
    public var interval: Duration? { timeout.map { $0 / 2 } }

    /// True when the watchdog is on and this keep-alive pings. Any thread; free.
    public var isEnabled: Bool { timer != nil }

    /// The loops whose progress each ping needs (empty: every tick of the timer pings). Any
    /// thread; free.
    public var watchedLoops: [ThreadRunLoop] { progress.loops }

    private let timer: RunLoopTimer?
    private let notifier: SystemdNotifier
    private let progress: LoopProgress

    /// Reads the watchdog settings from the environment (without unsetting them) and, when
    /// the watchdog is on, creates the ping timer (not yet scheduled). Any thread; costs a
    /// few `getenv` calls and one allocation.
    public convenience init(notifier: SystemdNotifier = SystemdNotifier()) {
        self.init(notifier: notifier, watching: [])
    }

    /// A keep-alive whose pings also need every loop of `loops` to make progress: each ping is
    /// sent only when each of them has completed a pass or is asleep in its wait since the last
    /// one (the keep-alive's own loop always has, since its timer fired). When a loop has not,
    /// the ping is withheld and `withheld`, if given, is called on the keep-alive's loop with the
    /// loops that made no progress. Any thread; as `init(notifier:)`.
    public init(notifier: SystemdNotifier = SystemdNotifier(), watching loops: [ThreadRunLoop],
                withheld: (@Sendable ([ThreadRunLoop]) -> Void)? = nil) {
        self.notifier = notifier
        let progress = LoopProgress(loops)
        self.progress = progress
        timeout = notifier.isEnabled ? Self.configuredTimeout() : nil
        guard let period = timeout.map({ $0 / 2 }) else {
            timer = nil
            return
        }
        // A little tolerance lets the loop fold the ping into another wake-up; the deadline
        // stays well inside the timeout (at most 55% of it).
        timer = RunLoopTimer(fireAt: .now + period, interval: period, tolerance: period / 10) { _ in
            let stuck = progress.stuckSinceLastCheck()
            if stuck.isEmpty {
                notifier.watchdog()
            } else {
                withheld?(stuck)
            }
        }
        timer?.label = "systemd watchdog"
    }

    /// The timeout `sd_watchdog_enabled(0, …)` reports for this process, or nil when the
    /// watchdog is off or its settings are malformed. Any thread; a few `getenv` calls.
    public static func configuredTimeout() -> Duration? {
        var usec: UInt64 = 0
        guard sd_watchdog_enabled(0, &usec) > 0, usec > 0 else { return nil }
        return .microseconds(Int64(clamping: usec))
    }

    /// Schedules the pings on `loop` in `mode` (default: every common mode). Any thread;
    /// a no-op when the watchdog is off. Sends one `WATCHDOG=1` right away, so a loop that
    /// starts late still pings in time; the watched loops' progress counts from then.
    public func add(to loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode = .common) {
        guard let timer, let interval else { return }
        _ = progress.stuckSinceLastCheck()
        notifier.watchdog()
        timer.fireDate = .now + interval
        loop.add(timer, forMode: mode)
    }

    /// Stops the pings for good (systemd will then act on its timeout unless the service
    /// stops first). Idempotent; any thread.
    public func invalidate() {
        timer?.invalidate()
    }

    /// False after `invalidate()`, and when the watchdog is off. Any thread.
    public var isValid: Bool { timer?.isValid ?? false }

    deinit {
        timer?.invalidate()
    }
}

/// The watched loops' pass counts at the last ping.
private final class LoopProgress: Sendable {
    let loops: [ThreadRunLoop]
    private let passesAtLastPing: Locked<[UInt64]>

    init(_ loops: [ThreadRunLoop]) {
        self.loops = loops
        passesAtLastPing = Locked(loops.map(Self.progress))
    }

    /// A loop's progress: passes begun plus callouts returned (Guarantees §3.56), so a loop
    /// that keeps completing callouts of one long batch is not stuck.
    private static func progress(_ loop: ThreadRunLoop) -> UInt64 {
        let statistics = loop.statistics
        return statistics.passes &+ statistics.callouts
    }

    /// The loops that neither began a pass, returned from a callout, nor are asleep in their
    /// wait since the last check that found none; when none is stuck, this check becomes the
    /// last one.
    func stuckSinceLastCheck() -> [ThreadRunLoop] {
        passesAtLastPing.withLock { last in
            let passes = loops.map(Self.progress)
            let stuck = loops.indices.filter { passes[$0] == last[$0] && !loops[$0].isWaiting }.map { loops[$0] }
            if stuck.isEmpty { last = passes }
            return stuck
        }
    }
}

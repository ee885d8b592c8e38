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
public final class WatchdogKeepAlive: Sendable {
    /// The watchdog timeout systemd expects pings within, or nil when the watchdog is off
    /// (including when there is no `NOTIFY_SOCKET`: pings would go nowhere).
    /// Any thread; free (read once by `init`).
    public let timeout: Duration?

    /// The ping period (half of `timeout`), or nil when the watchdog is off. Any thread; free.
    public var interval: Duration? { timeout.map { $0 / 2 } }

    /// True when the watchdog is on and this keep-alive pings. Any thread; free.
    public var isEnabled: Bool { timer != nil }

    private let timer: RunLoopTimer?
    private let notifier: SystemdNotifier

    /// Reads the watchdog settings from the environment (without unsetting them) and, when
    /// the watchdog is on, creates the ping timer (not yet scheduled). Any thread; costs a
    /// few `getenv` calls and one allocation.
    public init(notifier: SystemdNotifier = SystemdNotifier()) {
        self.notifier = notifier
        timeout = notifier.isEnabled ? Self.configuredTimeout() : nil
        guard let period = timeout.map({ $0 / 2 }) else {
            timer = nil
            return
        }
        // A little tolerance lets the loop fold the ping into another wake-up; the deadline
        // stays well inside the timeout (at most 55% of it).
        timer = RunLoopTimer(fireAt: .now + period, interval: period, tolerance: period / 10) { _ in
            notifier.watchdog()
        }
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
    /// starts late still pings in time.
    public func add(to loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode = .common) {
        guard let timer, let interval else { return }
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

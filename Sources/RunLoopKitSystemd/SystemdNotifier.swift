#if canImport(Glibc)
import Glibc
#endif
import CSystemd

/// Sends service-state notifications to systemd with `sd_notify(3)`.
///
/// Every method is a no-op that returns `false` when the process does not run under
/// systemd (no `NOTIFY_SOCKET` in the environment): a daemon built on it runs the same way
/// from a terminal, a container or a test. Nothing here throws; a failed send (systemd gone,
/// socket full) also returns `false`, because a daemon must not stop serving over a
/// notification it could not deliver.
///
/// Threads: every method may be called from any thread. libsystemd opens a datagram socket,
/// sends one message and closes it on each call, so a call costs three system calls
/// (a few microseconds) and takes no lock. It reads `NOTIFY_SOCKET` with `getenv` on each
/// call, so do not `setenv` concurrently. The environment is never unset, so child
/// processes you spawn inherit it unless you clear it for them.
public struct SystemdNotifier: Sendable {
    /// Creates a notifier. Free: no system call, no allocation. Any thread.
    public init() {}

    /// True when `NOTIFY_SOCKET` is set, i.e. notifications go somewhere.
    /// Any thread; one `getenv`.
    public var isEnabled: Bool {
        guard let value = getenv("NOTIFY_SOCKET") else { return false }
        return value.pointee != 0
    }

    /// Sends raw newline-separated assignments (`"READY=1\nSTATUS=Serving"`) in one datagram.
    /// Returns true when systemd received it, false when notifications are off or the send
    /// failed. Any thread; one socket, one sendmsg, one close.
    @discardableResult
    public func notify(_ assignments: String) -> Bool {
        sd_notify(0, assignments) > 0
    }

    /// `READY=1`: start-up finished (a `Type=notify` unit becomes active), or a reload finished.
    /// `status`, when given, goes in the same datagram as `STATUS=`. Any thread.
    @discardableResult
    public func ready(status: String? = nil) -> Bool {
        notify(Self.join("READY=1", status: status))
    }

    /// `STATUS=`: a free-form one-line state shown by `systemctl status`. Newlines in `text`
    /// become spaces (a newline would start another assignment). Any thread.
    @discardableResult
    public func status(_ text: String) -> Bool {
        notify("STATUS=" + Self.oneLine(text))
    }

    /// `RELOADING=1` with `MONOTONIC_USEC=` (the CLOCK_MONOTONIC time of the request, which
    /// systemd 253 and later require for `Type=notify-reload`; older versions ignore it).
    /// Send `ready()` once the reload is done. Any thread; adds one `clock_gettime`.
    @discardableResult
    public func reloading(status: String? = nil) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let usec = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1_000
        return notify(Self.join("RELOADING=1\nMONOTONIC_USEC=\(usec)", status: status))
    }

    /// `STOPPING=1`: the service is beginning its shutdown. Any thread.
    @discardableResult
    public func stopping(status: String? = nil) -> Bool {
        notify(Self.join("STOPPING=1", status: status))
    }

    /// `WATCHDOG=1`: one keep-alive ping. Normally sent by `WatchdogKeepAlive`. Any thread.
    @discardableResult
    public func watchdog() -> Bool {
        notify("WATCHDOG=1")
    }

    /// `MAINPID=`: tells systemd which process is the main one (for daemons that fork, or
    /// a supervisor that notifies on behalf of a child; needs `NotifyAccess=` to allow it).
    /// Any thread.
    @discardableResult
    public func mainPID(_ pid: pid_t) -> Bool {
        notify("MAINPID=\(pid)")
    }

    /// `EXTEND_TIMEOUT_USEC=`: asks for more time for the current start-up, reload or stop
    /// phase. Any thread.
    @discardableResult
    public func extendTimeout(by duration: Duration) -> Bool {
        notify("EXTEND_TIMEOUT_USEC=\(Self.microseconds(duration))")
    }

    static func join(_ head: String, status: String?) -> String {
        guard let status else { return head }
        return head + "\nSTATUS=" + oneLine(status)
    }

    static func oneLine(_ text: String) -> String {
        String(text.map { $0.isNewline ? " " : $0 })
    }

    /// Whole microseconds, zero for a negative duration and saturating at UInt64.max (the
    /// seconds of `components` times a million would overflow, and trap, for a huge extension).
    static func microseconds(_ duration: Duration) -> UInt64 {
        UInt64(clamping: duration.attoseconds / 1_000_000_000_000)
    }
}

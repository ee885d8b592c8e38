import PackageTestSupport
import Testing
@testable import RunLoopKitSystemd
#if canImport(Glibc)
import Glibc
#endif

/// The message formatting, in process. Delivery over a real notify socket (READY, STATUS,
/// RELOADING + MONOTONIC_USEC, STOPPING, WATCHDOG) is tested end to end in ExampleDaemonTests,
/// because changing NOTIFY_SOCKET in this process's environment would race other tests.
@Suite("SystemdNotifier")
struct SystemdNotifierTests {
    @Test("STATUS= text stays on one line; assignments share one datagram")
    func formatting() {
        #expect(SystemdNotifier.oneLine("a\nb\r\nc") == "a b c")
        #expect(SystemdNotifier.join("READY=1", status: nil) == "READY=1")
        #expect(SystemdNotifier.join("READY=1", status: "up\nnow") == "READY=1\nSTATUS=up now")
        #expect(SystemdNotifier.microseconds(.milliseconds(1500)) == 1_500_000)
        #expect(SystemdNotifier.microseconds(.seconds(-1)) == 0)
        #expect(SystemdNotifier.microseconds(.seconds(Int64.max)) == .max)
    }

    @Test("outside systemd every notification is a no-op that reports false",
          .enabled(if: getenv("NOTIFY_SOCKET") == nil, "the test runner itself runs under systemd"))
    func noOpWithoutNotifySocket() {
        let notifier = SystemdNotifier()
        #expect(!notifier.isEnabled)
        #expect(!notifier.ready(status: "x"))
        #expect(!notifier.status("x"))
        #expect(!notifier.reloading())
        #expect(!notifier.stopping())
        #expect(!notifier.watchdog())
        #expect(!notifier.mainPID(getpid()))
    }

    @Test("no WATCHDOG_USEC: the keep-alive has no timer and is a no-op",
          .enabled(if: getenv("WATCHDOG_USEC") == nil, "the test runner itself has a watchdog"))
    func watchdogOff() {
        let keepAlive = WatchdogKeepAlive()
        #expect(WatchdogKeepAlive.configuredTimeout() == nil)
        #expect(!keepAlive.isEnabled)
        #expect(keepAlive.interval == nil)
        keepAlive.invalidate()
    }
}

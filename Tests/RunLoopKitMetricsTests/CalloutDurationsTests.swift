#if Metrics
import Glibc
import MetricsTestKit
import RunLoopKit
import RunLoopKitMetrics
import Synchronization
import Testing

private final class Slow: Sendable {
    private let labels = Mutex<[String?]>([])
    func append(_ label: String?) { labels.withLock { $0.append(label) } }
    var values: [String?] { labels.withLock { $0 } }
}

@Suite("CalloutDurations")
struct CalloutDurationsTests {
    @Test("every callout of a loop is a value of its (thread, kind, label) timer; those over a threshold are handed on")
    func recordsEveryCalloutPerLabel() throws {
        let metrics = TestMetrics()
        let thread = ResidentThread(name: "metrics-callouts")
        defer { thread.stop() }
        let slow = Slow()
        CalloutDurations(factory: metrics).recordCallouts(of: thread.runLoop, handingOnSlowerThan: .milliseconds(200)) {
            slow.append($0.label)
        }
        let port = try MessagePort()
        port.label = "requests"
        let handled = Atomic<Int>(0)
        port.setHandler { message in
            if message.msgid == 3 { usleep(300_000) }
            handled.add(1, ordering: .relaxed)
        }
        thread.runLoop.add(port, forMode: .default)
        for msgid in 1...3 as ClosedRange<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        try thread.perform(waitUntilDone: true) {}
        let deadline = ContinuousClock.now + .seconds(30)
        while handled.load(ordering: .relaxed) < 3 && ContinuousClock.now < deadline { usleep(1_000) }
        // A callout is reported after it returns, so a perform that has returned may not be
        // recorded yet; the one after it is done, though, once the next has run.
        try thread.perform(waitUntilDone: true) {}
        try thread.perform(waitUntilDone: true) {}

        let portTimer = try metrics.expectTimer("runloopkit_callout_duration",
                                                [("thread", "metrics-callouts"), ("kind", "port"), ("label", "requests")])
        #expect(portTimer.values.count == 3)
        #expect((portTimer.values.max() ?? 0) >= 300_000_000)
        let blockTimer = try metrics.expectTimer("runloopkit_callout_duration",
                                                 [("thread", "metrics-callouts"), ("kind", "block"), ("label", "")])
        #expect(blockTimer.values.count >= 2)
        #expect(slow.values == ["requests"])
        port.invalidate()
    }
}
#endif

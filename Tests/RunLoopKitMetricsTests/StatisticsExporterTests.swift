#if Metrics
// StatisticsExporter against swift-metrics' TestMetrics: every statistic reaches its metric
// exactly, counters as the growth since the previous sample, gauges as the current value.

import Glibc
import MetricsTestKit
import RunLoopKit
import RunLoopKitMetrics
import Synchronization
import Testing

private let port = [("port", "requests")]

/// Polls `condition` until it holds, or for `limit` (a hang guard); the loop under test runs
/// on its own thread meanwhile.
private func waitUntil(limit: Duration = .seconds(30), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(1_000)
    }
    return true
}

/// An exporter whose timer never fires during a test (it samples when the test says so).
private func manualExporter(_ metrics: TestMetrics, on thread: ResidentThread, prefix: String = "runloopkit") -> StatisticsExporter {
    StatisticsExporter(sampledOn: thread.runLoop, every: .seconds(3600), factory: metrics, labelPrefix: prefix)
}

private final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

@Suite("StatisticsExporter")
struct StatisticsExporterTests {
    @Test("port counters export the growth since the last sample; gauges export queue high water and queued")
    func portCountersAndGauges() throws {
        let metrics = TestMetrics()
        let thread = ResidentThread(name: "metrics-port")
        defer { thread.stop() }
        let exporter = manualExporter(metrics, on: thread)
        let requests = try MessagePort(queueLimit: 16)
        exporter.track(requests, label: "requests")

        for index in 0..<5 { try requests.send(msgid: UInt32(index), timeout: .seconds(10)) }
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_port_sent", port).values == [5])
        #expect(try metrics.expectCounter("runloopkit_port_delivered", port).values == [])
        #expect(try metrics.expectGauge("runloopkit_port_queued", port).lastValue == 5)
        #expect(try metrics.expectGauge("runloopkit_port_queue_high_water", port).lastValue == 5)

        let delivered = Tally()
        requests.setHandler { _ in delivered.add() }
        thread.runLoop.add(requests, forMode: .default)
        #expect(waitUntil { requests.statistics.delivered == 5 })
        for index in 0..<3 { try requests.send(msgid: UInt32(index), timeout: .seconds(10)) }
        #expect(waitUntil { requests.statistics.delivered == 8 })
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_port_sent", port).values == [5, 3])
        #expect(try metrics.expectCounter("runloopkit_port_delivered", port).values == [8])
        #expect(try metrics.expectCounter("runloopkit_port_discarded", port).values == [])
        #expect(try metrics.expectGauge("runloopkit_port_queued", port).lastValue == 0)
        #expect(try metrics.expectGauge("runloopkit_port_queue_high_water", port).lastValue == 5)

        // Nothing changed: no counter hears of it.
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_port_sent", port).values == [5, 3])
        #expect(try metrics.expectCounter("runloopkit_port_delivered", port).totalValue == 8)
    }

    @Test("discarded and senders-blocked counters")
    func discardedAndSendersBlocked() throws {
        let metrics = TestMetrics()
        let thread = ResidentThread(name: "metrics-drop")
        defer { thread.stop() }
        let exporter = manualExporter(metrics, on: thread)
        let full = try MessagePort(queueLimit: 1)
        exporter.track(full, label: "requests")

        try full.send(msgid: 1, timeout: .seconds(10))
        #expect(throws: PortError.timedOut) { try full.send(msgid: 2, timeout: .milliseconds(10)) }
        full.invalidate()
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_port_senders_blocked", port).totalValue == 1)
        #expect(try metrics.expectCounter("runloopkit_port_discarded", port).totalValue == 1)
        #expect(try metrics.expectCounter("runloopkit_port_sent", port).totalValue == 1)
    }

    @Test("loop counters equal the loop's statistics, per thread name, and grow by exactly what the loop did")
    func loopCounters() throws {
        let metrics = TestMetrics()
        let sampler = ResidentThread(name: "metrics-sampler")
        let worker = ResidentThread(name: "metrics-worker")
        defer {
            sampler.stop()
            worker.stop()
        }
        let exporter = manualExporter(metrics, on: sampler)
        exporter.track(worker)
        let dimensions = [("thread", "metrics-worker")]

        let fired = Tally()
        worker.runLoop.add(RunLoopTimer(fireAt: .now) { _ in fired.add() }, forMode: .default)
        #expect(waitUntil { fired.value == 1 && worker.runLoop.isWaiting })
        let before = worker.runLoop.statistics
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_loop_passes", dimensions).totalValue == Int64(before.passes))
        #expect(try metrics.expectCounter("runloopkit_loop_wake_ups", dimensions).totalValue == Int64(before.wakeUps))
        #expect(try metrics.expectCounter("runloopkit_loop_handled_sources", dimensions).totalValue == Int64(before.handledSources))
        #expect(try metrics.expectCounter("runloopkit_loop_timer_fires", dimensions).values == [1])

        try worker.perform(waitUntilDone: true) {}
        try worker.perform(waitUntilDone: true) {}
        #expect(waitUntil { worker.runLoop.isWaiting })
        let after = worker.runLoop.statistics
        #expect(after.handledSources == before.handledSources + 2)
        exporter.sample()
        #expect(try metrics.expectCounter("runloopkit_loop_handled_sources", dimensions).values.last == 2)
        #expect(try metrics.expectCounter("runloopkit_loop_passes", dimensions).totalValue == Int64(after.passes))
        #expect(try metrics.expectCounter("runloopkit_loop_wake_ups", dimensions).totalValue == Int64(after.wakeUps))
        #expect(try metrics.expectCounter("runloopkit_loop_timer_fires", dimensions).totalValue == 1)
    }

    @Test("the repeating timer on the chosen loop samples by itself, with a tenth of its interval as tolerance")
    func timerSamples() throws {
        let metrics = TestMetrics()
        let sampler = ResidentThread(name: "metrics-timer")
        defer { sampler.stop() }
        let exporter = StatisticsExporter(sampledOn: sampler.runLoop, every: .milliseconds(5), factory: metrics)
        let requests = try MessagePort()
        exporter.track(requests, label: "requests")
        try requests.send(msgid: 1, timeout: .seconds(10))
        try requests.send(msgid: 2, timeout: .seconds(10))

        #expect(waitUntil { (try? metrics.expectCounter("runloopkit_port_sent", port).totalValue) == 2 })
        #expect(try metrics.expectGauge("runloopkit_port_queued", port).lastValue == 2)
        // The loop counts a timer's fire after its callout returns, so the sample can be seen first.
        #expect(waitUntil { sampler.runLoop.statistics.timerFires >= 1 })
        #expect(exporter.timer.interval == .milliseconds(5))
        #expect(exporter.timer.tolerance == .microseconds(500))
    }

    @Test("dropping the exporter, or invalidate(), ends its timer")
    func droppingTheExporterEndsItsTimer() throws {
        let thread = ResidentThread(name: "metrics-drop-t")
        defer { thread.stop() }
        var exporter: StatisticsExporter? = StatisticsExporter(sampledOn: thread.runLoop, factory: TestMetrics())
        let timer = try #require(exporter?.timer)
        #expect(timer.isValid)
        exporter = nil
        #expect(!timer.isValid)

        let kept = StatisticsExporter(sampledOn: thread.runLoop, factory: TestMetrics())
        kept.invalidate()
        #expect(!kept.timer.isValid)
    }

    @Test("untrack destroys an item's metrics; tracking under a new label moves it and starts from its totals")
    func untrackAndRelabel() throws {
        let metrics = TestMetrics()
        let thread = ResidentThread(name: "metrics-untrack")
        defer { thread.stop() }
        let exporter = manualExporter(metrics, on: thread, prefix: "daemon")
        let requests = try MessagePort()
        try requests.send(msgid: 1, timeout: .seconds(10))
        exporter.track(requests, label: "requests")
        exporter.track(requests, label: "requests")
        exporter.sample()
        #expect(try metrics.expectCounter("daemon_port_sent", port).values == [1])

        exporter.track(requests, label: "inbox")
        #expect(throws: (any Error).self) { try metrics.expectCounter("daemon_port_sent", port) }
        exporter.sample()
        #expect(try metrics.expectCounter("daemon_port_sent", [("port", "inbox")]).values == [1])

        exporter.untrack(requests)
        #expect(throws: (any Error).self) { try metrics.expectCounter("daemon_port_sent", [("port", "inbox")]) }
        try requests.send(msgid: 2, timeout: .seconds(10))
        exporter.sample()
        #expect(metrics.counters.isEmpty)

        exporter.track(thread)
        try thread.perform(waitUntilDone: true) {}
        #expect(waitUntil { thread.runLoop.isWaiting })
        let passes = thread.runLoop.statistics.passes
        exporter.sample()
        #expect(passes > 0)
        #expect(try metrics.expectCounter("daemon_loop_passes", [("thread", "metrics-untrack")]).totalValue == Int64(passes))
        exporter.untrack(thread)
        #expect(metrics.counters.isEmpty)
    }
}
#endif

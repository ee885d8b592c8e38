#if Metrics
import CoreMetrics
import RunLoopKit

/// Exports `MessagePort.Statistics` and `ThreadRunLoop.Statistics` as swift-metrics counters
/// and gauges, sampled by a repeating `RunLoopTimer` on a loop you pick: the exporter starts
/// no thread of its own, and the sampling runs between that loop's other work.
///
/// ```swift
/// MetricsSystem.bootstrap(myBackend)                        // once, at startup
/// let exporter = StatisticsExporter(sampledOn: ThreadRunLoop.main, every: .seconds(10))
/// exporter.track(requests, label: "requests")               // a MessagePort
/// exporter.track(worker)                                    // a ResidentThread: its loop
/// ```
///
/// Each sample reads every tracked item's statistics and reports what changed since the last
/// sample. The statistics are totals since the item was created, so counters receive the
/// difference (`increment(by:)`): the first sample after `track` reports the totals so far,
/// later ones what was added in between. Gauges are set to the current value.
///
/// | Metric (with the default prefix)     | Kind    | From                                      |
/// |--------------------------------------|---------|-------------------------------------------|
/// | `runloopkit_port_sent`               | counter | `MessagePort.Statistics.sent`             |
/// | `runloopkit_port_delivered`          | counter | `MessagePort.Statistics.delivered`        |
/// | `runloopkit_port_discarded`          | counter | `MessagePort.Statistics.discarded`        |
/// | `runloopkit_port_senders_blocked`    | counter | `MessagePort.Statistics.sendersBlocked`   |
/// | `runloopkit_port_queue_high_water`   | gauge   | `MessagePort.Statistics.queueHighWater`   |
/// | `runloopkit_port_queued`             | gauge   | `MessagePort.queuedCount`                 |
/// | `runloopkit_loop_passes`             | counter | `ThreadRunLoop.Statistics.passes`         |
/// | `runloopkit_loop_wake_ups`           | counter | `ThreadRunLoop.Statistics.wakeUps`        |
/// | `runloopkit_loop_handled_sources`    | counter | `ThreadRunLoop.Statistics.handledSources` |
/// | `runloopkit_loop_timer_fires`        | counter | `ThreadRunLoop.Statistics.timerFires`     |
///
/// Port metrics carry the dimension `("port", label)`, loop metrics `("thread", name)`. Give
/// each tracked item its own label: two items with one label feed the same metrics (their
/// counters add up, their gauges overwrite each other).
///
/// The sampling timer is a source of the loop's `mode` (by default every common mode), so that
/// loop's `run()` no longer ends for want of sources while the exporter lives; it fires with a
/// tolerance of a tenth of the interval, so it can share wake-ups with the loop's other timers.
/// The exporter holds the items it tracks until `untrack`; dropping the exporter (or
/// `invalidate()`) stops the sampling.
public final class StatisticsExporter: Sendable {
    /// The metrics factory the exporter creates its counters and gauges with. Any thread; free.
    public let factory: any MetricsFactory
    /// The first part of every metric label (`<prefix>_port_sent`, …). Any thread; free.
    public let labelPrefix: String
    /// The timer that samples; invalid once the exporter is invalidated. Any thread; free.
    public let timer: RunLoopTimer

    private let state = Locked(TrackedItems())

    /// Creates an exporter that samples on `loop` every `interval`, in `mode`, creating its
    /// metrics with `factory` (by default the one `MetricsSystem.bootstrap` installed). The first
    /// sample is one interval from now. Any thread; one timer added to `loop`.
    public init(sampledOn loop: ThreadRunLoop, every interval: Duration = .seconds(10),
                mode: ThreadRunLoop.Mode = .common, factory: any MetricsFactory = MetricsSystem.factory,
                labelPrefix: String = "runloopkit") {
        precondition(interval > .zero, "StatisticsExporter(every: \(interval)): the sampling interval must be positive")
        self.factory = factory
        self.labelPrefix = labelPrefix
        let exporter = WeakExporter()
        timer = RunLoopTimer(interval: interval, repeats: true) { _ in exporter.object?.sample() }
        timer.tolerance = interval / 10
        exporter.object = self
        loop.add(timer, forMode: mode)
    }

    deinit {
        timer.invalidate()
    }

    /// Exports `port`'s statistics with the dimension `("port", label)` from the next sample on.
    /// Tracking a tracked port again with another label moves it to the new label (the old
    /// label's metrics are destroyed; the new ones start from the port's totals). Any thread;
    /// a lock and, on first use, creating six metrics with the factory.
    public func track(_ port: MessagePort, label: String) {
        let replaced: PortMetrics? = state.withLock { state in
            let key = ObjectIdentifier(port)
            let old = state.ports[key]
            guard old?.metrics.label != label else { return nil }
            state.ports[key] = TrackedPort(port: port, metrics: PortMetrics(label: label, prefix: labelPrefix, factory: factory))
            return old?.metrics
        }
        replaced?.destroy()
    }

    /// Exports `loop`'s statistics with the dimension `("thread", threadName)` from the next
    /// sample on; tracking it again with another name moves it, as for ports. Any thread; a lock
    /// and, on first use, creating four metrics with the factory.
    public func track(_ loop: ThreadRunLoop, threadName: String) {
        let replaced: LoopMetrics? = state.withLock { state in
            let key = ObjectIdentifier(loop)
            let old = state.loops[key]
            guard old?.metrics.threadName != threadName else { return nil }
            state.loops[key] = TrackedLoop(loop: loop, metrics: LoopMetrics(threadName: threadName, prefix: labelPrefix, factory: factory))
            return old?.metrics
        }
        replaced?.destroy()
    }

    /// Exports the loop of `thread` under the thread's name. Any thread; as `track(_:threadName:)`.
    public func track(_ thread: ResidentThread) {
        track(thread.runLoop, threadName: thread.name)
    }

    /// Stops exporting `port` and destroys its metrics (so a backend forgets the label). Reports
    /// nothing more, not even what changed since the last sample: call `sample()` first for
    /// that. Any thread; a lock.
    public func untrack(_ port: MessagePort) {
        state.withLock { $0.ports.removeValue(forKey: ObjectIdentifier(port)) }?.metrics.destroy()
    }

    /// Stops exporting `loop` and destroys its metrics, as `untrack(_:)` for ports. Any thread; a lock.
    public func untrack(_ loop: ThreadRunLoop) {
        state.withLock { $0.loops.removeValue(forKey: ObjectIdentifier(loop)) }?.metrics.destroy()
    }

    /// Stops exporting the loop of `thread`. Any thread; a lock.
    public func untrack(_ thread: ResidentThread) {
        untrack(thread.runLoop)
    }

    /// Reads every tracked item's statistics now and reports the changes, as the timer does.
    /// Useful right before shutdown, so the last changes are not lost. Any thread; holds the
    /// exporter's lock while it reads each port's statistics (a lock each, plus one for
    /// `queuedCount`) and each loop's (four atomic loads), and updates their metrics.
    public func sample() {
        state.withLock { state in
            for index in state.ports.indices { state.ports.values[index].sample() }
            for index in state.loops.indices { state.loops.values[index].sample() }
        }
    }

    /// Stops the sampling timer; the metrics stay as they are, and `sample()` still works.
    /// Idempotent. Any thread; the timer's `invalidate()`.
    public func invalidate() {
        timer.invalidate()
    }
}

extension StatisticsExporter {
    /// The timer's way back to the exporter, weak so that the loop (which holds the timer) does
    /// not keep the exporter alive: dropping the exporter ends the sampling.
    private final class WeakExporter: @unchecked Sendable {
        // Written once, in the exporter's init, before the timer is added to a loop.
        weak var object: StatisticsExporter?
    }
}
#endif

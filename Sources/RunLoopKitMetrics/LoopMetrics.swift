#if Metrics
import CoreMetrics
import RunLoopKit

/// The metrics of one tracked run loop (dimension `("thread", threadName)`).
final class LoopMetrics: Sendable {
    let threadName: String
    private let passes: Counter
    private let wakeUps: Counter
    private let handledSources: Counter
    private let timerFires: Counter

    init(threadName: String, prefix: String, factory: any MetricsFactory) {
        self.threadName = threadName
        let dimensions = [("thread", threadName)]
        passes = Counter(label: "\(prefix)_loop_passes", dimensions: dimensions, factory: factory)
        wakeUps = Counter(label: "\(prefix)_loop_wake_ups", dimensions: dimensions, factory: factory)
        handledSources = Counter(label: "\(prefix)_loop_handled_sources", dimensions: dimensions, factory: factory)
        timerFires = Counter(label: "\(prefix)_loop_timer_fires", dimensions: dimensions, factory: factory)
    }

    /// Reports the change from `previous` to `current` (every loop statistic is a counter).
    func report(_ current: ThreadRunLoop.Statistics, since previous: ThreadRunLoop.Statistics) {
        passes.add(current.passes, since: previous.passes)
        wakeUps.add(current.wakeUps, since: previous.wakeUps)
        handledSources.add(current.handledSources, since: previous.handledSources)
        timerFires.add(current.timerFires, since: previous.timerFires)
    }

    func destroy() {
        passes.destroy()
        wakeUps.destroy()
        handledSources.destroy()
        timerFires.destroy()
    }
}

/// A tracked loop and the statistics its metrics last reported.
struct TrackedLoop {
    let loop: ThreadRunLoop
    let metrics: LoopMetrics
    private var reported = ThreadRunLoop.Statistics()

    init(loop: ThreadRunLoop, metrics: LoopMetrics) {
        self.loop = loop
        self.metrics = metrics
    }

    mutating func sample() {
        let current = loop.statistics
        metrics.report(current, since: reported)
        reported = current
    }
}
#endif

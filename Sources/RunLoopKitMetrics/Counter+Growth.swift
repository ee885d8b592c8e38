#if Metrics
import CoreMetrics

extension Counter {
    /// Adds how much a monotonic statistic grew between two samples; nothing when it did not,
    /// so an idle item sends its backend nothing.
    func add(_ current: UInt64, since previous: UInt64) {
        guard current > previous else { return }
        increment(by: Int64(clamping: current - previous))
    }
}
#endif

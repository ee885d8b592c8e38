#if Metrics
import CoreMetrics
import RunLoopKit

/// The metrics of one tracked port (dimension `("port", label)`).
final class PortMetrics: Sendable {
    let label: String
    private let sent: Counter
    private let delivered: Counter
    private let discarded: Counter
    private let sendersBlocked: Counter
    private let queueHighWater: Gauge
    private let queued: Gauge

    init(label: String, prefix: String, factory: any MetricsFactory) {
        self.label = label
        let dimensions = [("port", label)]
        sent = Counter(label: "\(prefix)_port_sent", dimensions: dimensions, factory: factory)
        delivered = Counter(label: "\(prefix)_port_delivered", dimensions: dimensions, factory: factory)
        discarded = Counter(label: "\(prefix)_port_discarded", dimensions: dimensions, factory: factory)
        sendersBlocked = Counter(label: "\(prefix)_port_senders_blocked", dimensions: dimensions, factory: factory)
        queueHighWater = Gauge(label: "\(prefix)_port_queue_high_water", dimensions: dimensions, factory: factory)
        queued = Gauge(label: "\(prefix)_port_queued", dimensions: dimensions, factory: factory)
    }

    /// Reports the change from `previous` to `current`: counters by their difference (the
    /// statistics only grow), gauges by value.
    func report(_ current: MessagePort.Statistics, since previous: MessagePort.Statistics, queuedCount: Int) {
        sent.add(current.sent, since: previous.sent)
        delivered.add(current.delivered, since: previous.delivered)
        discarded.add(current.discarded, since: previous.discarded)
        sendersBlocked.add(current.sendersBlocked, since: previous.sendersBlocked)
        queueHighWater.record(current.queueHighWater)
        queued.record(queuedCount)
    }

    func destroy() {
        sent.destroy()
        delivered.destroy()
        discarded.destroy()
        sendersBlocked.destroy()
        queueHighWater.destroy()
        queued.destroy()
    }
}

/// A tracked port and the statistics its metrics last reported.
struct TrackedPort {
    let port: MessagePort
    let metrics: PortMetrics
    private var reported = MessagePort.Statistics()

    init(port: MessagePort, metrics: PortMetrics) {
        self.port = port
        self.metrics = metrics
    }

    mutating func sample() {
        let current = port.statistics
        metrics.report(current, since: reported, queuedCount: port.queuedCount)
        reported = current
    }
}
#endif

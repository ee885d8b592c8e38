#if Metrics
import RunLoopKit

/// What a `StatisticsExporter` tracks, keyed by object identity. Guarded by the exporter's lock.
struct TrackedItems {
    var ports: [ObjectIdentifier: TrackedPort] = [:]
    var loops: [ObjectIdentifier: TrackedLoop] = [:]
}
#endif

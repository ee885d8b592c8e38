// A one-file user of RunLoopKitMetrics: the exporter's type is all it needs to link.
import RunLoopKitMetrics

print("exporter: \(StatisticsExporter.self)")

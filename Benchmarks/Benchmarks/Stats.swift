/// Percentiles of raw samples, by sorting them: exact, and cheap next to the runs that
/// produce them (at most a few hundred thousand samples per row).
struct LatencySummary: Sendable {
    var p50: Double      // microseconds
    var p99: Double
    var p999: Double
    var mean: Double
    var count: Int

    /// Sorts `samples` (nanoseconds) in place and summarises them.
    init(sortingNanoseconds samples: UnsafeMutableBufferPointer<UInt64>) {
        precondition(!samples.isEmpty, "a latency run recorded no sample")
        var samples = samples
        samples.sort()
        count = samples.count
        p50 = Self.nearestRank(0.50, of: samples)
        p99 = Self.nearestRank(0.99, of: samples)
        p999 = Self.nearestRank(0.999, of: samples)
        mean = Double(samples.reduce(0, +)) / Double(samples.count) / 1_000
    }

    /// Sorts `measurement`'s samples in place and summarises them.
    init(_ measurement: LatencyMeasurement) {
        self.init(sortingNanoseconds: UnsafeMutableBufferPointer(rebasing: measurement.samples.storage[..<measurement.count]))
    }

    /// The nearest-rank percentile: the smallest sample with at least `fraction` of all
    /// samples at or below it.
    private static func nearestRank(_ fraction: Double, of sorted: UnsafeMutableBufferPointer<UInt64>) -> Double {
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return Double(sorted[max(rank, 1) - 1]) / 1_000
    }
}

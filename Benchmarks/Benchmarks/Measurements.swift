import CBenchmarkPeers

/// Allocation counters read at the start and the end of a measured window.
struct AllocationWindow: Sendable {
    var begin: bench_alloc_counts
    var end: bench_alloc_counts

    func allocationsPerMessage(_ messages: Int) -> Double {
        Double(end.allocations &- begin.allocations) / Double(max(messages, 1))
    }

    func bytesPerMessage(_ messages: Int) -> Double {
        Double(end.bytes &- begin.bytes) / Double(max(messages, 1))
    }
}

extension bench_alloc_counts {
    /// Adds what was allocated within `window`.
    mutating func add(_ window: AllocationWindow) {
        allocations += window.end.allocations &- window.begin.allocations
        bytes += window.end.bytes &- window.begin.bytes
    }
}

/// Samples owned by one latency run, allocated before its measured window so that
/// recording never allocates inside it.
final class SampleBuffer: @unchecked Sendable {
    // Unchecked: written by exactly one thread at a time (the side that records),
    // and read by the main thread only after that side signalled completion.
    let storage: UnsafeMutableBufferPointer<UInt64>

    init(capacity: Int) {
        storage = .allocate(capacity: capacity)
        storage.initialize(repeating: 0)
    }

    deinit { storage.deallocate() }
}

/// What a latency peer hands back: `count` samples in `samples`, plus the counters of
/// its measured window.
struct LatencyMeasurement {
    var samples: SampleBuffer
    var count: Int
    var sameCPU: Int
    var messages: Int
    var allocations: AllocationWindow
}

extension LatencyMeasurement {
    init(samples: SampleBuffer, c result: bench_latency_result) {
        self.init(samples: samples, count: result.count, sameCPU: result.same_cpu,
                  messages: Int(result.messages),
                  allocations: AllocationWindow(begin: result.allocs_begin, end: result.allocs_end))
    }
}

/// One point of the churn workload: `items` added then removed by `threads` threads.
struct ChurnPoint: Sendable, Equatable {
    var items: Int
    var threads: Int
    /// Wall time per add or remove (the median window's).
    var nanosecondsPerOperation: Double
    /// Instructions per add or remove, counted by callgrind over one window (one thread only;
    /// nil where valgrind is not installed). Unlike the wall time, they do not grow with cache
    /// misses: they say whether the bookkeeping's work grows with the items.
    var instructionsPerOperation: Double? = nil
}

/// One point of a scale row (`Workload.isScale`): the payload size in bytes (`payloads`,
/// `xpayloads`) or the number of ping-ponging thread pairs (`threads`); or of an `xlarge` row,
/// a message size in bytes.
struct ScalePoint: Sendable, Equatable {
    var parameter: Int
    /// Round-trip percentiles in microseconds, over every pair's samples.
    var p50: Double
    var p99: Double
    /// Round trips per second, all pairs together.
    var roundTripsPerSecond: Double
    /// Whole process, per one-way message of this point: a payload copied rather than shared
    /// shows here as its size in bytes.
    var allocationsPerMessage: Double
    var bytesPerMessage: Double
    /// xlarge, a point measured in alternation (`Interleaved`): the p50 of the configuration its
    /// bar reads against — the C memfd floor, or for the bisection the inline path.
    var referenceP50: Double? = nil
    /// xlarge: the p50 of a third configuration in the same alternation — memcpy of N beside the
    /// ordinary Data, the SealedMemory Data in the bisection.
    var besideP50: Double? = nil
}

/// What a scale row hands back: every point, and the counters of all its windows.
struct ScaleMeasurement {
    var points: [ScalePoint]
    /// One-way messages in all windows.
    var messages: Int
    var allocations: AllocationWindow
}

/// What the churn workload hands back: every point, and the counters of all its windows.
struct ChurnMeasurement {
    var points: [ChurnPoint]
    /// Adds and removes in all windows.
    var operations: Int
    var allocations: AllocationWindow
}

/// What a throughput peer hands back.
struct StreamMeasurement {
    var messages: Int
    var elapsedNanoseconds: UInt64
    var allocations: AllocationWindow
    var rssBegin: UInt64
    var rssEnd: UInt64
}

extension StreamMeasurement {
    /// Messages per second over the measured window.
    var messagesPerSecond: Double {
        Double(messages) * 1e9 / Double(max(elapsedNanoseconds, 1))
    }

    init(c result: bench_stream_result) {
        self.init(messages: Int(result.messages), elapsedNanoseconds: result.elapsed_ns,
                  allocations: AllocationWindow(begin: result.allocs_begin, end: result.allocs_end),
                  rssBegin: result.rss_begin, rssEnd: result.rss_end)
    }
}

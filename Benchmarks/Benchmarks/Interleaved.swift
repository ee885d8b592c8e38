import CBenchmarkPeers

/// A row measured in alternation with its reference configuration, in one process, for a bar
/// that compares the two within a few percent (`BenchmarkCase.interleavedReference`).
///
/// Measured as two rows of their own, the two would run a second or more apart, and on these
/// VMs a process's round trip moves by up to 1.5× from one such moment to the next (the same
/// code, one run after the other: 6.0 µs, then 8.8 µs), its stream rate as much (3.5 M/s, then
/// 2.5 M/s) — far more than the few percent a bar allows. Alternating short segments gives both
/// configurations the same moments.
enum Interleaved {
    /// Segments per configuration. They run in the order reference, row, row, reference,
    /// reference, row, … so that a drift across the run weighs on both alike. Short segments
    /// pair the two more closely; each starts its threads afresh (a fraction of a millisecond).
    static let segments = 32

    /// Runs `measure` 2 × `segments` times, alternately for the row (`reference` false) and for
    /// its reference; returns each configuration's measurements in the order taken.
    private static func alternate<Measurement>(_ measure: (_ reference: Bool) -> Measurement)
        -> (row: [Measurement], reference: [Measurement]) {
        var row: [Measurement] = []
        var reference: [Measurement] = []
        for index in 0..<2 * segments {
            if (index + 1) / 2 % 2 == 0 {
                reference.append(measure(true))
            } else {
                row.append(measure(false))
            }
        }
        return (row, reference)
    }

    /// Latency: each segment has 1/`segments` of `plan`'s warm-up, samples and budget (at least
    /// 100 warm-up rounds: its threads are new); each configuration's samples are joined.
    static func measure(_ plan: LatencyPlan, _ measure: (LatencyPlan, _ reference: Bool) -> LatencyMeasurement)
        -> (row: LatencyMeasurement, reference: LatencyMeasurement) {
        var segment = plan
        segment.capacity = max(plan.capacity / segments, 1)
        segment.budget = plan.budget / segments
        segment.warmup = max(plan.warmup / segments, 100)
        let (row, reference) = alternate { measure(segment, $0) }
        return (LatencyMeasurement(joining: row), LatencyMeasurement(joining: reference))
    }

    /// A stream: each segment has 1/`segments` of `plan`'s warm-up, messages and budget (at least
    /// 1,000 warm-up messages); each configuration's messages and time are summed.
    static func measure(_ plan: StreamPlan, _ measure: (StreamPlan, _ reference: Bool) -> StreamMeasurement)
        -> (row: StreamMeasurement, reference: StreamMeasurement) {
        var segment = plan
        segment.maxMessages = max(plan.maxMessages / segments, 1)
        segment.budget = plan.budget / segments
        segment.warmup = max(plan.warmup / segments, 1_000)
        let (row, reference) = alternate { measure(segment, $0) }
        return (StreamMeasurement(joining: row), StreamMeasurement(joining: reference))
    }
}

extension LatencyMeasurement {
    /// The samples of `parts` in one buffer, their counts and allocations summed.
    init(joining parts: [LatencyMeasurement]) {
        let count = parts.reduce(0) { $0 + $1.count }
        let samples = SampleBuffer(capacity: max(count, 1))
        var offset = 0
        var allocated = bench_alloc_counts()
        for part in parts {
            _ = UnsafeMutableBufferPointer(rebasing: samples.storage[offset..<offset + part.count])
                .update(fromContentsOf: part.samples.storage[..<part.count])
            offset += part.count
            allocated.add(part.allocations)
        }
        self.init(samples: samples, count: count, sameCPU: parts.reduce(0) { $0 + $1.sameCPU },
                  messages: parts.reduce(0) { $0 + $1.messages },
                  allocations: AllocationWindow(begin: bench_alloc_counts(), end: allocated))
    }
}

extension StreamMeasurement {
    /// `parts` as one stream: their messages, time and allocations summed, the RSS from the
    /// first one's start to the last one's end.
    init(joining parts: [StreamMeasurement]) {
        var allocated = bench_alloc_counts()
        for part in parts { allocated.add(part.allocations) }
        self.init(messages: parts.reduce(0) { $0 + $1.messages },
                  elapsedNanoseconds: parts.reduce(0) { $0 + $1.elapsedNanoseconds },
                  allocations: AllocationWindow(begin: bench_alloc_counts(), end: allocated),
                  rssBegin: parts.first?.rssBegin ?? 0, rssEnd: parts.last?.rssEnd ?? 0)
    }
}

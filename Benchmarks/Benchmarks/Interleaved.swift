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

    /// Runs `measure` 2 × `segments` times on 1/`segments` of `plan` each, alternately for the
    /// row (`reference` false) and for its reference; returns each configuration's segments
    /// joined into one measurement.
    static func measure<Plan: SegmentablePlan, Measurement: JoinableMeasurement>(
        _ plan: Plan, _ measure: (Plan, _ reference: Bool) -> Measurement
    ) -> (row: Measurement, reference: Measurement) {
        let joined = self.measure(plan, configurations: 2) { segment, configuration in measure(segment, configuration == 0) }
        return (joined[1], joined[0])
    }

    /// Runs `measure` `configurations` × `segments` times on 1/`segments` of `plan` each, for
    /// configurations 0, 1, … n−1, then n−1, … 1, 0, and so on (for two: 0 1 1 0 0 1 …), so that
    /// a drift across the run weighs on all alike; returns each configuration's segments joined,
    /// by configuration. Fewer segments suit runs whose every round is long (xlarge's 256 MiB).
    static func measure<Plan: SegmentablePlan, Measurement: JoinableMeasurement>(
        _ plan: Plan, configurations: Int, segments: Int = segments,
        _ measure: (Plan, _ configuration: Int) -> Measurement
    ) -> [Measurement] {
        let segment = plan.segment(of: segments)
        var parts = Array(repeating: [Measurement](), count: configurations)
        for block in 0..<segments {
            for step in 0..<configurations {
                let configuration = block % 2 == 0 ? step : configurations - 1 - step
                parts[configuration].append(measure(segment, configuration))
            }
        }
        return parts.map(Measurement.init(joining:))
    }
}

/// A plan that can be cut into equal segments, each a run of its own.
protocol SegmentablePlan {
    /// 1/`count` of this plan, with a warm-up long enough for the fresh threads of a segment.
    func segment(of count: Int) -> Self
}

/// Measurements whose segments add up to one.
protocol JoinableMeasurement {
    init(joining parts: [Self])
}

extension LatencyPlan: SegmentablePlan {
    /// 1/`count` of the warm-up (at least 100 rounds), the samples and the budget.
    func segment(of count: Int) -> LatencyPlan {
        LatencyPlan(warmup: max(warmup / count, 100), capacity: max(capacity / count, 1), budget: budget / count)
    }
}

extension StreamPlan: SegmentablePlan {
    /// 1/`count` of the warm-up (at least 1,000 messages), the messages and the budget.
    func segment(of count: Int) -> StreamPlan {
        var segment = self
        segment.warmup = max(warmup / count, 1_000)
        segment.maxMessages = max(maxMessages / count, 1)
        segment.budget = budget / count
        return segment
    }
}

extension LatencyMeasurement: JoinableMeasurement {
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

extension StreamMeasurement: JoinableMeasurement {
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

import CBenchmarkPeers

/// Turns a run of samples into a measurement the same way the C peers do
/// (`bench_recorder_add` in CBenchmarkPeers): discard the warm-up, open the
/// allocation window, record until the buffer is full or the budget is spent.
///
/// Used by exactly one thread: the side of a Swift peer that takes the samples.
struct LatencyRecorder {
    private let plan: LatencyPlan
    private let messagesPerSample: Int
    let samples: SampleBuffer
    private var rounds = 0
    private var count = 0
    private var sameCPU = 0
    private var startedAt: UInt64 = 0
    private var allocationsBegin = bench_alloc_counts()
    private var allocationsEnd = bench_alloc_counts()

    /// `messagesPerSample`: 2 for a round trip, 1 for a one-way wake-up.
    init(plan: LatencyPlan, messagesPerSample: Int) {
        self.plan = plan
        self.messagesPerSample = messagesPerSample
        samples = SampleBuffer(capacity: plan.capacity)
        if plan.warmup == 0 { startWindow() }
    }

    private mutating func startWindow() {
        allocationsBegin = bench_alloc_snapshot()
        startedAt = bench_now_ns()
    }

    /// Offers one sample taken at `now`; returns false once the run is complete.
    mutating func add(_ sample: UInt64, sameCPU same: Bool, now: UInt64) -> Bool {
        rounds += 1
        if rounds <= plan.warmup {
            if rounds == plan.warmup { startWindow() }
            return true
        }
        samples.storage[count] = sample
        count += 1
        if same { sameCPU += 1 }
        if count < plan.capacity && now &- startedAt < plan.budgetNanoseconds { return true }
        allocationsEnd = bench_alloc_snapshot()
        return false
    }

    var measurement: LatencyMeasurement {
        LatencyMeasurement(samples: samples, count: count, sameCPU: sameCPU,
                           messages: count * messagesPerSample,
                           allocations: AllocationWindow(begin: allocationsBegin, end: allocationsEnd))
    }
}

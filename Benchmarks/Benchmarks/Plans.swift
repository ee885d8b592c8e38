import CBenchmarkPeers

/// How long each case runs. Sized so that the default run (two regimes, every peer)
/// finishes in a few minutes on 2 vCPUs and `--quick` in under 30 s, while the default
/// still gives ≥ 10^4 samples to the slowest latency row (enough for a p99.9) and
/// RunLoopKit its full 10M-message stream.
struct Plans: Sendable {
    var latency: LatencyPlan
    var stream: StreamPlan
    var churn: ChurnPlan
    var largeData: LargeDataPlan

    init(options: Options) {
        largeData = LargeDataPlan(quick: options.quick)
        if options.quick {
            latency = LatencyPlan(warmup: 500, capacity: 50_000, budget: .milliseconds(120))
            stream = StreamPlan(warmup: 5_000, maxMessages: options.streamMessages ?? 300_000,
                                budget: .milliseconds(300))
            churn = ChurnPlan(minimumWindows: 1, budget: .zero)
        } else {
            latency = LatencyPlan(warmup: 2_000, capacity: 200_000, budget: .milliseconds(1_000))
            stream = StreamPlan(warmup: 50_000, maxMessages: options.streamMessages ?? 10_000_000,
                                budget: .seconds(3))
            churn = ChurnPlan(minimumWindows: 3, budget: .milliseconds(200))
        }
        stream.warmup = min(stream.warmup, stream.maxMessages / 10)
    }

    /// The latency run of `benchmarkCase`. Unpinned, a cross-process round trip takes about
    /// 100 µs on 2 vCPUs (two cross-CPU wake-ups plus the transport), so `xprocess` gets
    /// half as long again to keep its slowest row at ≥ 10^4 samples; `--quick` is unchanged.
    /// `actorhop` gets half as long, which keeps the default run short: its slowest row
    /// (unpinned, about 40 µs) still gets ≥ 10^4 samples.
    /// A case that runs twice (`BenchmarkCase.runsTwice`) has half the budget each time.
    func latency(for benchmarkCase: BenchmarkCase) -> LatencyPlan {
        var plan = latency
        if benchmarkCase.workload == .xprocess && latency.budget >= .seconds(1) { plan.budget = latency.budget * 3 / 2 }
        if benchmarkCase.workload == .actorhop { plan.budget = plan.budget / 2 }
        if benchmarkCase.runsTwice { plan.budget = plan.budget / 2 }
        return plan
    }

    /// The stream of `benchmarkCase`. RunLoopKit's `throughput` row sends all of
    /// `maxMessages` (its budget is only a guard, half the case timeout), because flat memory
    /// over a long stream is one of the bars; the peers stop at the
    /// budget, which keeps the slow ones (Foundation at a few hundred thousand messages per
    /// second) from dominating the run time. Every `asyncstream` row, RunLoopKit's included,
    /// stops at the budget: its long stream is the `throughput` row's. Their budget is a third
    /// of the others' (1 s, a few million messages), which keeps the default run within its
    /// time down. A case that runs twice (`BenchmarkCase.runsTwice`) has half the budget each
    /// time, except RunLoopKit's long stream, which sends all of it both times.
    func stream(for benchmarkCase: BenchmarkCase) -> StreamPlan {
        var plan = stream
        if benchmarkCase.workload == .throughput && benchmarkCase.peer == .runLoopKit {
            plan.budget = caseTimeout / 2
            return plan
        }
        if benchmarkCase.workload == .asyncstream { plan.budget = plan.budget / 3 }
        if benchmarkCase.runsTwice { plan.budget = plan.budget / 2 }
        return plan
    }

    /// Each point of a scale row: the latency plan with a third of its budget, so that a row
    /// of three or four points costs about one latency case; a point of 256 thread pairs
    /// shares the sample buffer among the pairs.
    var scale: LatencyPlan {
        var plan = latency
        plan.budget = latency.budget / 3
        return plan
    }

    /// An upper bound on one case's wall time, after which the parent kills the child
    /// and fails: a hung peer must not hang the run.
    var caseTimeout: Duration {
        max(latency.budget, stream.budget) * 6 + .seconds(30)
    }

    /// `caseTimeout`, and for the churn case the two callgrind runs it starts besides its timed
    /// windows (each a few tens of seconds: valgrind reads the whole executable's symbols).
    /// For an xlarge row, its plan's budgets (up to three configurations in alternation) and the
    /// 256 MiB buffers it fills, with room for a slow host.
    func caseTimeout(for benchmarkCase: BenchmarkCase) -> Duration {
        switch benchmarkCase.workload {
        case .churn: caseTimeout + .seconds(120)
        case .xlarge: caseTimeout + largeData.budget * 3 * 3
        default: caseTimeout
        }
    }
}

/// A latency run: `warmup` samples are discarded, then samples are recorded until
/// `capacity` are in or `budget` has passed since the first recorded one.
struct LatencyPlan: Sendable {
    var warmup: Int
    var capacity: Int
    var budget: Duration

    var budgetNanoseconds: UInt64 { budget.nanoseconds }
}

/// The churn workload: every size with every thread count; each point runs timed windows
/// until it has `minimumWindows` and `budget` has passed, and reports the median window. A
/// window repeats the add-then-remove of all items until it holds `operationsPerWindow`
/// operations, the same at every size, so that starting the threads weighs the same on
/// every point.
struct ChurnPlan: Sendable {
    var sizes = [1_000, 10_000, 100_000]
    var threadCounts = [1, 8]
    var operationsPerWindow = 200_000
    var minimumWindows: Int
    var budget: Duration
}

/// A throughput stream: `warmup` messages before the clock starts, then until
/// `maxMessages` in all or `budget` since the warm-up, whichever comes first.
struct StreamPlan: Sendable {
    var warmup: Int
    var maxMessages: Int
    var budget: Duration
    /// The bound of every queue: MessagePort's queueLimit, the C ring's slots and the
    /// credit window of the unbounded Swift peers.
    var queueLimit = 1024

    var budgetNanoseconds: UInt64 { budget.nanoseconds }

    var cPlan: bench_stream_plan {
        bench_stream_plan(max_messages: UInt64(maxMessages), warmup: UInt64(warmup),
                          budget_ns: budgetNanoseconds, queue_limit: UInt32(queueLimit))
    }
}

extension Duration {
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(seconds) * 1_000_000_000 + UInt64(attoseconds / 1_000_000_000)
    }
}

/// The xlarge workload (`LargeData`): per message size, the run of one configuration, and into
/// how many segments it is cut when configurations alternate (`Interleaved`). A round of 256 MiB
/// that is copied takes about a tenth of a second, so the large sizes get a few dozen rounds and
/// a few segments, the small ones thousands and more.
struct LargeDataPlan: Sendable {
    struct Size: Sendable {
        var bytes: Int
        var plan: LargeDataSegmentPlan
        var segments: Int
    }

    var sizes: [Size]
    /// Each point of the `inlineDataLimit` bisection (`LargeData.bisectionSizes`).
    var bisection: Size

    init(quick: Bool) {
        func size(_ bytes: Int, warmup: Int, rounds: Int, _ budget: Duration, segments: Int) -> Size {
            Size(bytes: bytes, plan: LargeDataSegmentPlan(LatencyPlan(warmup: warmup, capacity: rounds, budget: budget)),
                 segments: segments)
        }
        if quick {
            sizes = [size(64 << 10, warmup: 20, rounds: 300, .milliseconds(50), segments: 4),
                     size(1 << 20, warmup: 8, rounds: 100, .milliseconds(50), segments: 4),
                     size(16 << 20, warmup: 2, rounds: 16, .milliseconds(100), segments: 2),
                     size(256 << 20, warmup: 2, rounds: 4, .milliseconds(300), segments: 2)]
            bisection = size(0, warmup: 20, rounds: 300, .milliseconds(40), segments: 4)
        } else {
            sizes = [size(64 << 10, warmup: 160, rounds: 4_000, .milliseconds(400), segments: 16),
                     size(1 << 20, warmup: 32, rounds: 1_000, .milliseconds(400), segments: 16),
                     size(16 << 20, warmup: 8, rounds: 200, .milliseconds(800), segments: 8),
                     size(256 << 20, warmup: 4, rounds: 32, .milliseconds(2_500), segments: 4)]
            bisection = size(0, warmup: 160, rounds: 4_000, .milliseconds(300), segments: 16)
        }
    }

    /// One configuration's budget over every size and the bisection.
    var budget: Duration {
        sizes.reduce(Duration.zero) { $0 + $1.plan.latency.budget } + bisection.plan.latency.budget * LargeData.bisectionSizes.count
    }
}

/// A latency plan cut into segments that keep one warm-up round each (a `LatencyPlan` segment
/// keeps 100, which at 256 MiB would be ten seconds): xlarge's configurations share one
/// long-lived connection each, so a segment only has to take the switch from the other
/// configuration out of its samples.
struct LargeDataSegmentPlan: SegmentablePlan, Sendable {
    var latency: LatencyPlan

    init(_ latency: LatencyPlan) { self.latency = latency }

    func segment(of count: Int) -> LargeDataSegmentPlan {
        LargeDataSegmentPlan(LatencyPlan(warmup: max(latency.warmup / count, 1), capacity: max(latency.capacity / count, 1),
                                         budget: latency.budget / count))
    }
}

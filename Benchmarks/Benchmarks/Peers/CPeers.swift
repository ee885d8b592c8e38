import CBenchmarkPeers

/// The C peers (CBenchmarkPeers), run from Swift: each takes the plan, fills a result
/// and names what went wrong instead of returning a number when a message was wrong.
enum CPeers {
    typealias LatencyRun = (UnsafePointer<bench_latency_plan>?, UnsafeMutablePointer<bench_latency_result>?) -> Void
    typealias StreamRun = (UnsafePointer<bench_stream_plan>?, UnsafeMutablePointer<bench_stream_result>?) -> Void

    static func latency(_ plan: LatencyPlan, _ run: LatencyRun) -> LatencyMeasurement {
        let samples = SampleBuffer(capacity: plan.capacity)
        var cPlan = bench_latency_plan(samples: samples.storage.baseAddress, capacity: plan.capacity,
                                       warmup: plan.warmup, budget_ns: plan.budgetNanoseconds)
        var result = bench_latency_result()
        run(&cPlan, &result)
        if let failure = result.failure { fail(String(cString: failure)) }
        return LatencyMeasurement(samples: samples, c: result)
    }

    static func stream(_ plan: StreamPlan, _ run: StreamRun) -> StreamMeasurement {
        var cPlan = plan.cPlan
        var result = bench_stream_result()
        run(&cPlan, &result)
        if let failure = result.failure { fail(String(cString: failure)) }
        return StreamMeasurement(c: result)
    }
}

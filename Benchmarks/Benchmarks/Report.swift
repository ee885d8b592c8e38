/// All rows of one run, in table order, with each row's ratio to the C baseline of its
/// workload (`Workload.baseline`) and regime.
struct Report: Sendable {
    var machine: Machine
    var quick: Bool
    var results: [CaseResult]

    init(machine: Machine, quick: Bool, results: [CaseResult]) {
        self.machine = machine
        self.quick = quick
        self.results = results.sorted { order($0.benchmarkCase).lexicographicallyPrecedes(order($1.benchmarkCase)) }
    }

    func result(_ workload: Workload, _ peer: Peer, _ regime: Regime) -> CaseResult? {
        results.first { $0.benchmarkCase == BenchmarkCase(workload: workload, peer: peer, regime: regime) }
    }

    /// p50 over the baseline's p50 for latency rows (lower is better), msgs/s over the
    /// baseline's for throughput rows (higher is better).
    func ratio(_ row: CaseResult) -> Double? {
        let c = row.benchmarkCase
        guard let baseline = result(c.workload, c.workload.baseline, c.regime) else { return nil }
        if c.workload.measuresLatency {
            guard let p50 = row.p50, let base = baseline.p50, base > 0 else { return nil }
            return p50 / base
        }
        guard let rate = row.messagesPerSecond, let base = baseline.messagesPerSecond, base > 0 else { return nil }
        return rate / base
    }
}

/// Table order: workload, then regime, then the catalogue's peer order.
private func order(_ c: BenchmarkCase) -> [Int] {
    [Workload.allCases.firstIndex(of: c.workload)!,
     Regime.allCases.firstIndex(of: c.regime)!,
     Catalogue.peers(for: c.workload).firstIndex(of: c.peer) ?? Peer.allCases.count]
}

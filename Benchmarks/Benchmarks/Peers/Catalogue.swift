import CBenchmarkPeers

/// Which peer runs which workload, and how. The order here is the order of the rows.
///
/// sd-event takes part in the ping-pong only: as a throughput queue it would be the C
/// ring again with an epoll loop in front, and its wake-up is the eventfd's.
/// The throughput workload also has the "Swift Data ring" reference (the C ring's algorithm
/// in Swift, carrying `Data`): the floor under every Swift row.
/// The cross-process ping-pong has two peers: the kernel's SEQPACKET socketpair (its
/// baseline) and MessagePort's socketpair transport; the other frameworks have no port
/// that crosses a process boundary; "RunLoopKit xnamed" is the same exchange over a published
/// name (the initiator publishes, the responder connects by name). Its "C socketpair + epoll" reference is the baseline
/// asleep in epoll_wait: the kernel's floor under any event loop.
enum Catalogue {
    static func peers(for workload: Workload) -> [Peer] {
        switch workload {
        case .pingpong:
            [.cEventfd, .cSocketpair, .cSdEvent, .foundation, .dispatch, .nio, .runLoopKit]
        case .throughput:
            [.cEventfd, .cSocketpair, .foundation, .dispatch, .nio, .runLoopKit, .swiftRing]
        case .perform:
            [.cEventfd, .foundation, .dispatch, .nio, .runLoopKit]
        case .xprocess:
            [.cSocketpair, .cSocketpairEpoll, .runLoopKit, .runLoopKitNamed]
        }
    }

    /// Runs one case in this process and summarises it.
    static func run(_ benchmarkCase: BenchmarkCase, plans: Plans) -> CaseResult {
        switch benchmarkCase.workload {
        case .pingpong, .perform, .xprocess:
            let measurement = latency(benchmarkCase, plans.latency(for: benchmarkCase))
            let summary = LatencySummary(
                sortingNanoseconds: UnsafeMutableBufferPointer(rebasing: measurement.samples.storage[..<measurement.count]))
            return CaseResult(benchmarkCase, latency: summary, measurement: measurement)
        case .throughput:
            return CaseResult(benchmarkCase, stream: stream(benchmarkCase.peer, plans.stream(for: benchmarkCase.peer)))
        }
    }

    private static func latency(_ benchmarkCase: BenchmarkCase, _ plan: LatencyPlan) -> LatencyMeasurement {
        switch (benchmarkCase.workload, benchmarkCase.peer) {
        case (.pingpong, .cEventfd): CPeers.latency(plan, bench_eventfd_pingpong)
        case (.pingpong, .cSocketpair): CPeers.latency(plan, bench_socketpair_pingpong)
        case (.pingpong, .cSdEvent): CPeers.latency(plan, bench_sdevent_pingpong)
        case (.pingpong, .foundation): FoundationRunLoopPeer.pingPong(plan)
        case (.pingpong, .dispatch): DispatchPeer.pingPong(plan)
        case (.pingpong, .nio): NIOPeer.pingPong(plan)
        case (.pingpong, .runLoopKit): RunLoopKitPeer.pingPong(plan)
        case (.perform, .cEventfd): CPeers.latency(plan, bench_eventfd_wakeup)
        case (.perform, .foundation): FoundationRunLoopPeer.wakeUp(plan)
        case (.perform, .dispatch): DispatchPeer.wakeUp(plan)
        case (.perform, .nio): NIOPeer.wakeUp(plan)
        case (.perform, .runLoopKit): RunLoopKitPeer.wakeUp(plan)
        case (.xprocess, .cSocketpair): CPeers.latency(plan, bench_socketpair_xprocess)
        case (.xprocess, .cSocketpairEpoll): CPeers.latency(plan, bench_socketpair_epoll_xprocess)
        case (.xprocess, .runLoopKit): RunLoopKitPeer.crossProcessPingPong(plan)
        case (.xprocess, .runLoopKitNamed): RunLoopKitPeer.crossProcessPingPong(plan, named: true)
        default: fail("no peer \(benchmarkCase.peer.rawValue) for \(benchmarkCase.workload.rawValue)")
        }
    }

    private static func stream(_ peer: Peer, _ plan: StreamPlan) -> StreamMeasurement {
        switch peer {
        case .cEventfd: CPeers.stream(plan, bench_ring_throughput)
        case .cSocketpair: CPeers.stream(plan, bench_socketpair_throughput)
        case .foundation: FoundationRunLoopPeer.throughput(plan)
        case .dispatch: DispatchPeer.throughput(plan)
        case .nio: NIOPeer.throughput(plan)
        case .runLoopKit: RunLoopKitPeer.throughput(plan)
        case .swiftRing: SwiftRingPeer.throughput(plan)
        case .cSdEvent, .cSocketpairEpoll, .runLoopKitNamed: fail("no peer \(peer.rawValue) for throughput")
        }
    }
}

import CBenchmarkPeers
import RunLoopKit

/// Which peer runs which workload, and how. The order here is the order of the rows.
///
/// sd-event takes part in the ping-pong only: as a throughput queue it would be the C
/// ring again with an epoll loop in front, and its wake-up is the eventfd's.
/// The throughput workload also has the "Swift Data ring" reference (the C ring's algorithm
/// in Swift, carrying `Data`): the floor under every Swift row; and the "Swift [Component]
/// ring" reference, the same ring carrying the components array MessagePort's `send` takes.
/// Ping-pong and perform have the "RunLoopKit + loop health" reference: the same exchange with
/// a slow-callout handler and a `HangWatch` on, for the loop-health bar. Ping-pong and
/// throughput have "RunLoopKit + introspection" (enabled, no tool attached), throughput also
/// "RunLoopKit + monitor" (a `runloopctl monitor` client attached), for the introspection bars.
/// The ping-pong has two C references, the kernel's floors under RunLoopKit's two sleeps:
/// "C futex" (a mode with nothing the kernel must watch) and "C eventfd + epoll" (a mode with
/// descriptors, as the `idle` row's; shown there too).
/// The cross-process ping-pong has two peers: the kernel's SEQPACKET socketpair (its
/// baseline) and MessagePort's socketpair transport; the other frameworks have no port
/// that crosses a process boundary; "RunLoopKit xnamed" is the same exchange over a published
/// name (the initiator publishes, the responder connects by name). Its "C socketpair + epoll" reference is the baseline
/// asleep in epoll_wait: the kernel's floor under any event loop; "C socketpair + epoll +
/// credentials" also reads each packet's sender credentials, as RunLoopKit does for `sender`;
/// "… + SCM_PIDFD" also receives a pidfd of each packet's sender, what pinning every sender per
/// message would cost. "C sd-bus p2p" is what a C daemon author would use instead: a D-Bus
/// method call over a socketpair with libsystemd, no broker; "C sd-bus via dbus-daemon" the
/// same call through a private broker, run only where dbus-daemon is installed. "RunLoopKit
/// distributed call" is a distributed actor call (one `Int` argument and result) through
/// `PortActorSystem`, read against xnamed, to a default actor and to one pinned to a resident thread.
/// `idle` is RunLoopKit's ping-pong with idle items, beside the same C eventfd baseline, the
/// same ping-pong with one idle fd source (the floor its bar reads against: a loop that must
/// watch a descriptor sleeps in epoll) and with ten times the items (the flatness bar). `fanin` has the C ring's four-sender variant as
/// its baseline and the two Swift peers a daemon would feed from several threads. The scale
/// rows are RunLoopKit's alone.
/// The async workloads keep the C eventfd rows as their baseline (the same C code as
/// `pingpong` and `throughput`) and compare RunLoopKit with SwiftNIO's async counterparts
/// and the standard library's: a default actor, and `AsyncStream`.
/// `xlarge` has the C memfd floor as its baseline, a SOCK_STREAM copy and sd-bus beside it, and
/// RunLoopKit sending a SealedMemory Data and an ordinary one, each alternating with the floor,
/// and the bisection of `inlineDataLimit` (see `LargeData`).
enum Catalogue {
    static func peers(for workload: Workload) -> [Peer] {
        switch workload {
        case .pingpong:
            [.cEventfd, .cSocketpair, .cSdEvent, .cFutex, .cEventfdEpoll, .foundation, .dispatch, .nio, .runLoopKit,
             .runLoopKitHealth, .runLoopKitIntrospection] + TracingPeer.rows(for: .pingpong)
        case .idle:
            [.cEventfd, .cEventfdEpoll, .runLoopKitOneSource, .runLoopKit, .runLoopKitTenfold]
        case .throughput:
            [.cEventfd, .cSocketpair, .foundation, .dispatch, .nio, .runLoopKit, .runLoopKitBatch, .swiftRing, .componentRing,
             .runLoopKitIntrospection, .runLoopKitMonitored] + TracingPeer.rows(for: .throughput)
        case .fanin:
            [.cEventfd, .dispatch, .nio, .runLoopKit]
        case .perform:
            [.cEventfd, .foundation, .dispatch, .nio, .runLoopKit, .runLoopKitHealth]
        case .xprocess:
            [.cSocketpair, .cSocketpairEpoll, .cSocketpairEpollCredentials, .cSocketpairEpollPidfd, .cSdBus]
                + (bench_dbus_daemon_available() != 0 ? [.cSdBusBroker] : []) + [.runLoopKit, .runLoopKitNamed, .runLoopKitDistributed, .runLoopKitDistributedPinned]
        case .actorhop:
            [.cEventfd, .defaultActor, .nio, .runLoopKit]
        case .asyncstream:
            [.cEventfd, .asyncStream, .nio, .runLoopKit, .runLoopKitAsyncSend]
        case .churn, .payloads, .xpayloads, .threads:
            [.runLoopKit]
        case .xhost:
            [.grpcEcho, .grpcEchoDefaults, .runLoopKit]
        case .xhostrate:
            [.grpcEcho, .runLoopKit]
        case .xlarge:
            [.cMemfd, .cStreamCopy, .cSdBus, .runLoopKitSealedMemory, .runLoopKit, .runLoopKitInlineBisection]
        }
    }

    /// Why rows of `workload` that the catalogue lists elsewhere are missing on this host.
    static func notes(for workload: Workload) -> [String] {
        if workload == .xlarge {
            return ["xlarge: the \(Peer.cSdBus.rawValue) row has no 256 MiB point: a D-Bus array holds at most 64 MiB"]
        }
        guard workload == .xprocess, bench_dbus_daemon_available() == 0 else { return [] }
        return ["xprocess: the \(Peer.cSdBusBroker.rawValue) row is skipped: dbus-daemon is not on PATH"]
    }

    /// Runs one case in this process and summarises it.
    static func run(_ benchmarkCase: BenchmarkCase, plans: Plans) -> CaseResult {
        switch benchmarkCase.workload {
        case .pingpong, .idle, .perform, .xprocess, .actorhop, .xhost:
            let plan = plans.latency(for: benchmarkCase)
            guard let reference = benchmarkCase.interleavedReference else {
                let measurement = latency(benchmarkCase, plan)
                return CaseResult(benchmarkCase, latency: LatencySummary(measurement), measurement: measurement)
            }
            let (row, alternate) = Interleaved.measure(plan) { segment, isReference in
                // The reference runs without the instrument a tracing row installed.
                isReference ? MessageContext.withoutPropagator { latency(reference, segment) } : latency(benchmarkCase, segment)
            }
            var result = CaseResult(benchmarkCase, latency: LatencySummary(row), measurement: row)
            result.referenceP50 = LatencySummary(alternate).p50
            return result
        case .throughput, .fanin, .asyncstream, .xhostrate:
            let plan = plans.stream(for: benchmarkCase)
            guard let reference = benchmarkCase.interleavedReference else {
                return CaseResult(benchmarkCase, stream: stream(benchmarkCase, plan))
            }
            let (row, alternate) = Interleaved.measure(plan) { segment, isReference in
                isReference ? MessageContext.withoutPropagator { stream(reference, segment) } : stream(benchmarkCase, segment)
            }
            var result = CaseResult(benchmarkCase, stream: row)
            result.referenceMessagesPerSecond = alternate.messagesPerSecond
            return result
        case .payloads, .xpayloads, .threads:
            return CaseResult(benchmarkCase, scale: RunLoopKitPeer.scale(benchmarkCase.workload, plans.scale))
        case .churn:
            return CaseResult(benchmarkCase, churn: Churn.measure(plans.churn))
        case .xlarge:
            // Its interleaved rows alternate inside `LargeData`, a size at a time.
            return CaseResult(benchmarkCase, scale: LargeData.measure(benchmarkCase, plans.largeData))
        }
    }

    private static func latency(_ benchmarkCase: BenchmarkCase, _ plan: LatencyPlan) -> LatencyMeasurement {
        switch (benchmarkCase.workload, benchmarkCase.peer) {
        case (.pingpong, .cEventfd): CPeers.latency(plan, bench_eventfd_pingpong)
        case (.pingpong, .cSocketpair): CPeers.latency(plan, bench_socketpair_pingpong)
        case (.pingpong, .cSdEvent): CPeers.latency(plan, bench_sdevent_pingpong)
        case (.pingpong, .cFutex): CPeers.latency(plan, bench_futex_pingpong)
        case (.pingpong, .cEventfdEpoll), (.idle, .cEventfdEpoll): CPeers.latency(plan, bench_eventfd_epoll_pingpong)
        case (.pingpong, .foundation): FoundationRunLoopPeer.pingPong(plan)
        case (.pingpong, .dispatch): DispatchPeer.pingPong(plan)
        case (.pingpong, .nio): NIOPeer.pingPong(plan)
        case (.pingpong, .runLoopKit): RunLoopKitPeer.pingPong(plan)
        case (.pingpong, .runLoopKitHealth): RunLoopKitPeer.pingPong(plan, loopHealth: true)
        case (.pingpong, .runLoopKitIntrospection): IntrospectionPeer.pingPong(plan)
        #if Tracing
        case (.pingpong, .runLoopKitTracing): TracingPeer.pingPong(plan, withinContext: false)
        case (.pingpong, .runLoopKitTraceContext): TracingPeer.pingPong(plan, withinContext: true)
        #endif
        case (.idle, .cEventfd): CPeers.latency(plan, bench_eventfd_pingpong)
        case (.idle, .runLoopKit): RunLoopKitPeer.pingPong(plan, idle: .standard)
        case (.idle, .runLoopKitOneSource): RunLoopKitPeer.pingPong(plan, idle: .oneSource)
        case (.idle, .runLoopKitTenfold): RunLoopKitPeer.pingPong(plan, idle: .tenfold)
        case (.perform, .cEventfd): CPeers.latency(plan, bench_eventfd_wakeup)
        case (.perform, .foundation): FoundationRunLoopPeer.wakeUp(plan)
        case (.perform, .dispatch): DispatchPeer.wakeUp(plan)
        case (.perform, .nio): NIOPeer.wakeUp(plan)
        case (.perform, .runLoopKit): RunLoopKitPeer.wakeUp(plan)
        case (.perform, .runLoopKitHealth): RunLoopKitPeer.wakeUp(plan, loopHealth: true)
        case (.xprocess, .cSocketpair): CPeers.latency(plan, bench_socketpair_xprocess)
        case (.xprocess, .cSocketpairEpoll): CPeers.latency(plan, bench_socketpair_epoll_xprocess)
        case (.xprocess, .cSocketpairEpollCredentials): CPeers.latency(plan, bench_socketpair_epoll_credentials_xprocess)
        case (.xprocess, .cSocketpairEpollPidfd): CPeers.latency(plan, bench_socketpair_epoll_pidfd_xprocess)
        case (.xprocess, .cSdBus): CPeers.latency(plan, bench_sdbus_p2p_xprocess)
        case (.xprocess, .cSdBusBroker): CPeers.latency(plan, bench_sdbus_broker_xprocess)
        case (.xprocess, .runLoopKit): RunLoopKitPeer.crossProcessPingPong(plan)
        case (.actorhop, .cEventfd): CPeers.latency(plan, bench_eventfd_pingpong)
        case (.actorhop, .defaultActor): DefaultActorPeer.actorHop(plan)
        case (.actorhop, .nio): NIOPeer.actorHop(plan)
        case (.actorhop, .runLoopKit): RunLoopKitPeer.actorHop(plan)
        case (.xprocess, .runLoopKitNamed): RunLoopKitPeer.crossProcessPingPong(plan, named: true)
        case (.xprocess, .runLoopKitDistributed): DistributedCalls.measure(plan)
        case (.xprocess, .runLoopKitDistributedPinned): DistributedCalls.measure(plan, pinned: true)
        #if GRPC
        case (.xhost, _): GRPCBridgePeer.latency(benchmarkCase.peer, plan)
        #endif
        default: fail("no peer \(benchmarkCase.peer.rawValue) for \(benchmarkCase.workload.rawValue)")
        }
    }

    private static func stream(_ benchmarkCase: BenchmarkCase, _ plan: StreamPlan) -> StreamMeasurement {
        switch (benchmarkCase.workload, benchmarkCase.peer) {
        case (.throughput, .cEventfd), (.asyncstream, .cEventfd): CPeers.stream(plan, bench_ring_throughput)
        case (.throughput, .cSocketpair): CPeers.stream(plan, bench_socketpair_throughput)
        case (.throughput, .foundation): FoundationRunLoopPeer.throughput(plan)
        case (.throughput, .dispatch): DispatchPeer.throughput(plan)
        case (.throughput, .nio): NIOPeer.throughput(plan)
        case (.throughput, .runLoopKit): RunLoopKitPeer.throughput(plan)
        case (.throughput, .runLoopKitBatch): RunLoopKitPeer.batchThroughput(plan)
        case (.throughput, .runLoopKitIntrospection): IntrospectionPeer.throughput(plan, monitored: false)
        case (.throughput, .runLoopKitMonitored): IntrospectionPeer.throughput(plan, monitored: true)
        #if Tracing
        case (.throughput, .runLoopKitTracing): TracingPeer.throughput(plan)
        #endif
        case (.throughput, .swiftRing): SwiftRingPeer.throughput(plan)
        case (.throughput, .componentRing): ComponentRingPeer.throughput(plan)
        case (.fanin, .cEventfd): CPeers.stream(plan, bench_ring_fanin)
        case (.fanin, .dispatch): DispatchPeer.fanIn(plan)
        case (.fanin, .nio): NIOPeer.fanIn(plan)
        case (.fanin, .runLoopKit): RunLoopKitPeer.fanIn(plan)
        case (.asyncstream, .asyncStream): AsyncStreamPeer.asyncStream(plan)
        case (.asyncstream, .nio): NIOPeer.asyncStream(plan)
        case (.asyncstream, .runLoopKit): RunLoopKitPeer.asyncStream(plan)
        case (.asyncstream, .runLoopKitAsyncSend): RunLoopKitPeer.asyncSendStream(plan)
        #if GRPC
        case (.xhostrate, _): GRPCBridgePeer.rate(benchmarkCase.peer, plan)
        #endif
        default: fail("no peer \(benchmarkCase.peer.rawValue) for \(benchmarkCase.workload.rawValue)")
        }
    }
}

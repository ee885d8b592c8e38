/// What the benchmark measures: a workload, run by one peer, in one scheduling regime.
///
/// A new workload is a new `Workload` case (with its `baseline`) plus its entries in
/// `Catalogue`: the table, the JSON and the ratio column are all driven by these
/// three values.
enum Workload: String, CaseIterable, Sendable {
    /// Round trip of an 8-byte payload between two threads.
    case pingpong
    /// RunLoopKit's `pingpong` with 1,000 idle ports, 1,000 far-future timers and 100 idle
    /// descriptor sources in the same mode on both threads (and with one idle fd source, and with
    /// ten times the items): what idle items cost a pass.
    case idle
    /// One-way stream of 64-byte payloads through a bounded queue.
    case throughput
    /// The `throughput` stream from `BENCH_FANIN_SENDERS` (4) sender threads into one queue,
    /// each sender's messages checked in their own order.
    case fanin
    /// One-way latency from "run this on that thread" to it running there.
    case perform
    /// Round trip of an 8-byte payload between two processes (Protocols/port-message-frame.md).
    case xprocess
    /// `await` round trip from a task on the cooperative pool to an actor method and back,
    /// carrying an 8-byte payload.
    case actorhop
    /// One-way stream of 64-byte payloads from a sender thread, bounded to 1024 in flight,
    /// consumed by a task with `for await`.
    case asyncstream
    /// Scale row: RunLoopKit's `pingpong` carrying one shared `Data` of 8 B, 4 KiB, 64 KiB and
    /// 1 MiB (see `ScalePoint`).
    case payloads
    /// Scale row: RunLoopKit's `xprocess` carrying 8 B up to the largest DATA component a
    /// frame holds (65,512 bytes).
    case xpayloads
    /// A Data of 64 KiB, 1 MiB, 16 MiB and 256 MiB to another process and an 8-byte
    /// acknowledgement back, the receiver reading the first and last byte: RunLoopKit's sealed
    /// memory against the C memfd floor, a SOCK_STREAM copy and sd-bus; also the bisection of
    /// `inlineDataLimit` (see `LargeData`). Its rows are points per size, in a table of their own.
    case xlarge
    /// Scale row: 1, 16 and 256 pairs of resident threads, each pair ping-ponging at once.
    case threads
    /// Adding then removing N items of one mode in random order, from 1 and from 8 threads:
    /// RunLoopKit's own bookkeeping, with no peer (see `Churn`).
    case churn
    /// Round trip of a 64-byte payload over RunLoopKit's gRPC bridge on loopback, beside
    /// grpc-swift's own bidirectional echo (see `GRPCBridgePeer`); built with the GRPC trait.
    case xhost
    /// The `xhost` exchange with 64 round trips in flight: round trips per second.
    case xhostrate

    /// Whether this build can run the workload: the xhost rows need the GRPC trait.
    var isAvailable: Bool {
        #if GRPC
        true
        #else
        self != .xhost && self != .xhostrate
        #endif
    }

    /// Whether rows of this workload are latency percentiles (else a message rate, or for
    /// churn the cost per operation of each point).
    var measuresLatency: Bool {
        self == .pingpong || self == .idle || self == .perform || self == .xprocess || self == .actorhop
            || self == .xhost
    }

    /// Whether rows of this workload are a message rate through a bounded queue.
    var isStream: Bool { self == .throughput || self == .fanin || self == .asyncstream || self == .xhostrate }

    /// Rows of several points each (`ScalePoint`), reported in their own table and not in the
    /// bars: how a cost grows with payload size or thread count.
    var isScale: Bool { self == .payloads || self == .xpayloads || self == .threads }

    /// Rows of a point per message size, in a table of their own, read by bars (`xlarge`).
    var isSized: Bool { self == .xlarge }

    /// Every ratio is relative to this peer in the same workload and regime: the C
    /// eventfd peers between threads, the C SEQPACKET socketpair between processes
    /// (the cross-process bar; there is no eventfd row there).
    /// The async workloads keep the C eventfd rows as theirs: an actor hop to another thread
    /// is a two-thread round trip, an async stream a bounded one-way stream. `idle` keeps the
    /// ping-pong's; `fanin`'s is the C ring's four-sender variant (`bench_ring_fanin`); `xlarge`'s
    /// the C memfd floor. The scale rows and churn have no peer: their points are read against
    /// each other.
    var baseline: Peer {
        switch self {
        case .pingpong, .idle, .throughput, .fanin, .perform, .actorhop, .asyncstream: .cEventfd
        case .xprocess: .cSocketpair
        case .churn, .payloads, .xpayloads, .threads: .runLoopKit
        case .xhost, .xhostrate: .grpcEcho
        case .xlarge: .cMemfd
        }
    }
}

/// The frameworks a daemon author would otherwise hand messages between threads with.
/// Raw values are the names printed and written to JSON.
enum Peer: String, CaseIterable, Sendable {
    case cEventfd = "C eventfd"
    case cSocketpair = "C socketpair"
    case cSdEvent = "C sd-event"
    case foundation = "Foundation RunLoop"
    case dispatch = "DispatchQueue"
    case nio = "SwiftNIO"
    case runLoopKit = "RunLoopKit"
    /// `actorhop` only: an actor with the runtime's default executor (the cooperative pool).
    case defaultActor = "default actor"
    /// `asyncstream` only: the standard library's `AsyncStream`.
    case asyncStream = "AsyncStream"
    /// `asyncstream` only: RunLoopKit's stream fed by a task's `await port.send` rather
    /// than a thread's blocking `send`.
    case runLoopKitAsyncSend = "RunLoopKit async send"
    /// Throughput only, a reference rather than a competitor: see `SwiftRingPeer`.
    case swiftRing = "Swift Data ring"
    /// Cross-process only, a reference: the C socketpair ping-pong with each side asleep in
    /// epoll_wait(2), as any event loop sleeps (see `bench_socketpair_epoll_xprocess`).
    case cSocketpairEpoll = "C socketpair + epoll"
    /// Cross-process only, a reference: the same with each side reading every packet's sender
    /// credentials, as RunLoopKit does for `Message.sender` (see
    /// `bench_socketpair_epoll_credentials_xprocess`).
    case cSocketpairEpollCredentials = "C socketpair + epoll + credentials"
    /// Cross-process only, a reference: the same with each side also receiving a pidfd of
    /// every packet's sender (SCM_PIDFD), what pinning each sender per message would cost (see
    /// `bench_socketpair_epoll_pidfd_xprocess`).
    case cSocketpairEpollPidfd = "C socketpair + epoll + SCM_PIDFD"
    /// Cross-process only: an sd-bus peer-to-peer method call `Echo(t) -> t` (libsystemd, no
    /// broker), what a C daemon author would use for request/reply (see `bench_sdbus_p2p_xprocess`).
    case cSdBus = "C sd-bus p2p"
    /// Cross-process only: the same call through a private dbus-daemon (see
    /// `bench_sdbus_broker_xprocess`); skipped, with a note, where dbus-daemon is not installed.
    case cSdBusBroker = "C sd-bus via dbus-daemon"
    /// Ping-pong only, a reference: two threads waking each other through a futex word
    /// (FUTEX_WAIT_PRIVATE / FUTEX_WAKE_PRIVATE), the floor of RunLoopKit's sleep in a mode with
    /// nothing the kernel must watch (see `bench_futex_pingpong`).
    case cFutex = "C futex"
    /// Ping-pong and idle, a reference: the same exchange with each thread asleep in epoll_wait(2)
    /// on its edge-triggered, never-read doorbell eventfd and 100 idle eventfds, the floor of
    /// RunLoopKit's sleep in the `idle` row's mode (see `bench_eventfd_epoll_pingpong`).
    case cEventfdEpoll = "C eventfd + epoll"
    /// Throughput only, a reference: the Swift Data ring carrying the components array
    /// MessagePort's `send` takes (see `ComponentRingPeer`).
    case componentRing = "Swift [Component] ring"
    /// Cross-process only: RunLoopKit over a published name (`publish(as:)` / `connect(to:)`)
    /// instead of an inherited send right — the `xnamed` row.
    case runLoopKitNamed = "RunLoopKit xnamed"
    /// Cross-process only: a distributed actor call with one `Int` argument and result through
    /// `PortActorSystem` (RunLoopKitDistributed), beside xnamed (see `DistributedCalls`).
    case runLoopKitDistributed = "RunLoopKit distributed call"
    /// Cross-process only: the same call on an actor pinned to a resident thread of the callee.
    case runLoopKitDistributedPinned = "RunLoopKit distributed call (pinned actor)"
    /// idle only: RunLoopKit's ping-pong with one idle fd source in the mode and nothing else,
    /// the floor of the idle bar.
    case runLoopKitOneSource = "RunLoopKit, 1 idle fd source"
    /// idle only: RunLoopKit's ping-pong with ten times the `idle` row's items.
    case runLoopKitTenfold = "RunLoopKit, 10× idle items"
    /// xhost only: grpc-swift's bidirectional echo with flush coalescing off, as the bridge
    /// configures its transport (the xhost baseline).
    case grpcEcho = "grpc-swift bidi echo"
    /// xhost only, a reference: the same echo with gRPC's default transport configuration.
    case grpcEchoDefaults = "grpc-swift echo, defaults"
    /// Ping-pong and perform, a reference: RunLoopKit with a slow-callout handler (10 ms) on each
    /// loop and a `HangWatch` (10 ms) over both, read against the plain RunLoopKit row by the
    /// loop-health bar (Benchmarks/README.md).
    case runLoopKitHealth = "RunLoopKit + loop health"
    /// Throughput only: RunLoopKit's stream received by a batch handler (`setBatchHandler`, one
    /// call per pass, each message owned) instead of a handler — reported beside the bar, which
    /// reads the handler's row.
    case runLoopKitBatch = "RunLoopKit batch"
    /// Ping-pong and throughput, a reference: RunLoopKit with `Introspection` enabled and no
    /// tool attached, read against the plain RunLoopKit row by the introspection bar.
    case runLoopKitIntrospection = "RunLoopKit + introspection"
    /// Throughput only, a reference: the stream with a `runloopctl monitor` client attached.
    case runLoopKitMonitored = "RunLoopKit + monitor"
    /// Ping-pong and throughput, a reference (Tracing trait): `PortTracing` installed and no
    /// context current at the send, read against plain RunLoopKit by the tracing bar.
    case runLoopKitTracing = "RunLoopKit + tracing"
    /// Ping-pong only, a reference (Tracing trait): every message sent within a trace context,
    /// which the instrument injects and each handler runs within.
    case runLoopKitTraceContext = "RunLoopKit + trace context"
    /// xlarge only, the floor: a sealed memfd passed with SCM_RIGHTS (see `bench_memfd_xlarge_open`).
    case cMemfd = "C memfd + SCM_RIGHTS"
    /// xlarge only: the bytes copied through a SOCK_STREAM socketpair (see `bench_stream_xlarge_open`).
    case cStreamCopy = "C SOCK_STREAM copy"
    /// xlarge only: RunLoopKit sending a Data made per message with `SealedMemory.data(count:initializingWith:)`
    /// (the plain RunLoopKit row sends an ordinary Data, which the transport copies into sealed memory).
    case runLoopKitSealedMemory = "RunLoopKit SealedMemory"
    /// xlarge only: the bisection of `inlineDataLimit`, RunLoopKit's inline and sealed paths at
    /// sizes around it, alternating in one process (see `LargeData.bisectionSizes`).
    case runLoopKitInlineBisection = "RunLoopKit inline vs sealed"

    /// A reference row (a floor to read the others against), not a peer being compared.
    var isReference: Bool {
        switch self {
        case .swiftRing, .componentRing, .cSocketpairEpoll, .cSocketpairEpollCredentials, .cSocketpairEpollPidfd,
             .cFutex, .cEventfdEpoll, .grpcEchoDefaults, .runLoopKitHealth, .runLoopKitIntrospection, .runLoopKitMonitored,
             .runLoopKitTracing, .runLoopKitTraceContext: true
        default: false
        }
    }
}

/// Where the scheduler may put the two threads.
enum Regime: String, CaseIterable, Sendable {
    /// Both threads on one CPU: the stable measure of software cost.
    case pinned
    /// Wherever the scheduler likes: on a small VM, dominated by cross-CPU wake-ups.
    case unpinned
}

struct BenchmarkCase: Hashable, Sendable, CustomStringConvertible {
    var workload: Workload
    var peer: Peer
    var regime: Regime

    /// Pinned latency and stream cases run twice, in two child processes far apart in the run,
    /// each with half the budget, and the row keeps the faster run (`CaseResult.isFaster`). On
    /// these VMs one process can run up to 1.5× slower than the next, for a few seconds at a
    /// time, for the C baselines and the frameworks alike; one such stretch then no longer
    /// decides a ratio on its own. Every peer is measured the same way.
    var runsTwice: Bool { regime == .pinned && (workload.measuresLatency || workload.isStream) }

    /// The configuration this row is measured in alternation with, in the same process
    /// (`Interleaved`), for a bar that compares the two: RunLoopKit without its loop-health
    /// hooks for the loop-health rows, without introspection for the introspection rows, RunLoopKit's one-sender stream for its fan-in row and for
    /// the Swift Data ring's row, and the C floor a cross-process bar reads against: the C
    /// socketpair + epoll + credentials loop for xprocess, the sd-bus peer-to-peer call for
    /// xnamed (each in its own child processes, as the row's), the C memfd floor for RunLoopKit's
    /// xlarge rows (a C peer kept across the row's segments: `LargeData`). Nil for every other row.
    var interleavedReference: BenchmarkCase? {
        switch (workload, peer) {
        case (_, .runLoopKitHealth), (_, .runLoopKitIntrospection), (_, .runLoopKitMonitored), (_, .runLoopKitTracing),
             (_, .runLoopKitTraceContext):
            BenchmarkCase(workload: workload, peer: .runLoopKit, regime: regime)
        case (.fanin, .runLoopKit), (.throughput, .swiftRing):
            BenchmarkCase(workload: .throughput, peer: .runLoopKit, regime: regime)
        case (.xprocess, .runLoopKit): BenchmarkCase(workload: .xprocess, peer: .cSocketpairEpollCredentials, regime: regime)
        case (.xprocess, .runLoopKitNamed): BenchmarkCase(workload: .xprocess, peer: .cSdBus, regime: regime)
        case (.xlarge, .runLoopKit), (.xlarge, .runLoopKitSealedMemory):
            BenchmarkCase(workload: .xlarge, peer: .cMemfd, regime: regime)
        default: nil
        }
    }

    /// The single-argument form passed to a child process: `workload/peer/regime`.
    var description: String { "\(workload.rawValue)/\(peer.rawValue)/\(regime.rawValue)" }

    init(workload: Workload, peer: Peer, regime: Regime) {
        self.workload = workload
        self.peer = peer
        self.regime = regime
    }

    init?(_ description: String) {
        let parts = description.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3,
              let workload = Workload(rawValue: parts[0]),
              let peer = Peer(rawValue: parts[1]),
              let regime = Regime(rawValue: parts[2]) else { return nil }
        self.init(workload: workload, peer: peer, regime: regime)
    }
}

/// How many round trips the `xhostrate` workload keeps in flight (its bar's name says so
/// whether or not this build runs it).
enum GRPCBridgeWindow {
    static let roundTrips = 64
}

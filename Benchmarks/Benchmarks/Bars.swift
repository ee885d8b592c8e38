import Foundation
import RunLoopKit

/// The performance bars of Benchmarks/README.md, checked against the pinned rows of this run (the
/// regime that measures software cost rather than the VM's cross-CPU wake-ups).
/// A bar whose rows were not run (filtered out) is reported as not measured.
struct Bar: Sendable {
    var name: String
    /// nil when the rows it needs were not measured.
    var met: Bool?
    var detail: String

    static func evaluate(_ report: Report) -> [Bar] {
        let regime = Regime.pinned
        func row(_ workload: Workload, _ peer: Peer) -> CaseResult? { report.result(workload, peer, regime) }
        var bars: [Bar] = []

        // Second-round bars (Benchmarks/README.md): ratios to the C floor where a framework can come near
        // it, and to the Swift peers a daemon author would otherwise pick.
        let ping = row(.pingpong, .runLoopKit)
        let cBaseline = Workload.pingpong.baseline.rawValue
        bars.append(bar("MessagePort ping-pong p50 ≤ 1.15× \(cBaseline)",
                        ping.flatMap(report.ratio)) { ratio in (ratio <= 1.15, String(format: "%.2f×", ratio)) })
        bars.append(below("MessagePort ping-pong p50 below DispatchQueue, SwiftNIO, Foundation RunLoop",
                          ping, [.dispatch, .nio, .foundation], .pingpong, row))

        let perform = row(.perform, .runLoopKit)
        bars.append(below("perform p50 below SwiftNIO, DispatchQueue", perform, [.nio, .dispatch], .perform, row))
        bars.append(bar("perform p50 ≤ 1.15× \(Workload.perform.baseline.rawValue)",
                        perform.flatMap(report.ratio)) { ratio in (ratio <= 1.15, String(format: "%.2f×", ratio)) })

        // The Swift Data ring is the least any Swift queue of `Data` costs: the floor the bar reads against.
        // The [Component] ring (the same ring carrying the array `send(msgid:components:…)` takes)
        // is reported beside it, not read by the bar: the least a queue of the binding's messages costs.
        let stream = row(.throughput, .runLoopKit)
        let ring = row(.throughput, .swiftRing)
        let componentRing = row(.throughput, .componentRing)
        // Against the ring measured in alternation with RunLoopKit's stream (`Interleaved`): the
        // ring's row holds both rates.
        var streamVsRing: (Double, Double)?
        if let rate = ring?.referenceMessagesPerSecond, let floor = ring?.messagesPerSecond { streamVsRing = (rate, floor) }
        let streamRatio: Double? = stream.flatMap(report.ratio)
        bars.append(bar("MessagePort throughput ≥ 0.75× the Swift Data ring", streamVsRing) { (rate: Double, floor: Double) in
            var detail = String(format: "%.2f× (%.2fM/s vs %.2fM/s, alternating in one process)", rate / floor, rate / 1e6, floor / 1e6)
            if let own = stream?.messagesPerSecond { detail += String(format: "; the throughput row %.2fM/s", own / 1e6) }
            if let componentRing, let components = componentRing.messagesPerSecond {
                detail += String(format: "; %.2f× the Swift [Component] ring (%.2fM/s), which allocates %.2f/msg",
                                 rate / components, components / 1e6, componentRing.allocationsPerMessage)
            }
            if let streamRatio { detail += String(format: "; %.2f× C ring + eventfd", streamRatio) }
            if let batch = row(.throughput, .runLoopKitBatch)?.messagesPerSecond {
                detail += String(format: "; a batch handler: %.2f× the ring (%.2fM/s)", batch / floor, batch / 1e6)
            }
            return (rate >= 0.75 * floor, detail)
        })
        bars.append(ahead("MessagePort throughput ahead of DispatchQueue, SwiftNIO, Foundation RunLoop",
                          stream, [.dispatch, .nio, .foundation], .throughput, row))
        // Compared at the table's precision: a few allocations by the runtime during a long
        // stream must not decide the bar.
        bars.append(bar("MessagePort throughput allocations per message ≤ the Swift Data ring's",
                        stream.flatMap { s in ring.map { (s, $0) } }) { s, floor in
            let mine = (s.allocationsPerMessage * 100).rounded() / 100
            let theirs = (floor.allocationsPerMessage * 100).rounded() / 100
            return (mine <= theirs, String(format: "%.2f vs %.2f allocs/msg", s.allocationsPerMessage, floor.allocationsPerMessage)
                + (componentRing.map { String(format: " (Swift [Component] ring: %.2f)", $0.allocationsPerMessage) } ?? ""))
        })
        bars.append(bar("MessagePort stream: memory flat (RSS growth ≤ 1 MiB), O(1) allocations per message",
                        stream.flatMap { s in s.rssGrowthBytes.map { (s, $0) } }) { s, growth in
            (growth <= 1 << 20, String(format: "RSS Δ %+.1f MiB over %d messages, %.2f allocs / %.0f B per message",
                                        Double(growth) / 1_048_576, s.messages, s.allocationsPerMessage, s.bytesPerMessage))
        })

        let fanIn = row(.fanin, .runLoopKit)
        bars.append(ahead("fan-in (4 senders) ahead of SwiftNIO, DispatchQueue", fanIn, [.nio, .dispatch], .fanin, row))
        // Against the one-sender stream measured in alternation with it (`Interleaved`); the
        // throughput row's rate beside it.
        var fanInRates: (Double, Double)?
        if let rate = fanIn?.messagesPerSecond, let one = fanIn?.referenceMessagesPerSecond { fanInRates = (rate, one) }
        let throughputRow = stream?.messagesPerSecond.map { String(format: "; the throughput row %.2fM/s", $0 / 1e6) } ?? ""
        bars.append(bar("fan-in (4 senders) ≥ 0.9× RunLoopKit's one-sender throughput", fanInRates) { rate, one in
            let detail = String(format: "%.2f× (%.2fM/s vs %.2fM/s, alternating in one process)", rate / one, rate / 1e6, one / 1e6)
            return (rate >= 0.9 * one, detail + throughputRow)
        })

        // A loop whose mode holds fd sources sleeps in epoll_wait, one with nothing the kernel must
        // watch on its futex: the idle row is read against the same ping-pong with one idle fd
        // source, whose loops sleep as its loops do, so the ratio is what the idle items cost.
        // The C eventfd + epoll reference (the same sleep with no loop around it) is beside it.
        let oneSource = row(.idle, .runLoopKitOneSource)?.p50
        let idle = row(.idle, .runLoopKit)?.p50
        let epollFloor = (row(.idle, .cEventfdEpoll) ?? row(.pingpong, .cEventfdEpoll))?.p50
        bars.append(bar("idle items: ping-pong p50 with \(IdleItems.Load.standard.summary) idle "
                            + "≤ 1.1× the ping-pong with one idle fd source",
                        idle.flatMap { idle in oneSource.map { (idle, $0) } }) { idle, floor in
            (idle <= 1.1 * floor, String(format: "%.2f× (%.2f µs vs %.2f µs)", idle / floor, idle, floor)
                + (epollFloor.map { String(format: "; C eventfd + epoll %.2f µs", $0) } ?? ""))
        })
        bars.append(bar("idle items flat: ten times the idle items (\(IdleItems.Load.tenfold.summary)) ≤ 1.05× the idle row",
                        row(.idle, .runLoopKitTenfold)?.p50.flatMap { tenfold in idle.map { (tenfold, $0) } }) { tenfold, idle in
            (tenfold <= 1.05 * idle, String(format: "%.2f× (%.2f µs vs %.2f µs)", tenfold / idle, tenfold, idle))
        })

        // The floor under a loop that tells its callers who sent each message (third
        // round): the C exchange asleep in epoll_wait, reading each packet's sender credentials.
        // RunLoopKit's senders are pinned too (§2d); the C loop that also receives a pidfd per
        // packet, what pinning every message would cost, is reported beside, as are the same C
        // loop without credentials and the blocking C peer (the row's ×C baseline).
        let crossProcess = row(.xprocess, .runLoopKit)
        let socketEpollFloor = row(.xprocess, .cSocketpairEpoll)?.p50
        let pidfdRow = row(.xprocess, .cSocketpairEpollPidfd)?.p50
        let blockingRatio = crossProcess.flatMap(report.ratio)
        // The floor measured in alternation with the row, in one process (`Interleaved`); the
        // floor's own row, minutes apart, only when the row was not interleaved.
        let credentialsFloor = crossProcess?.referenceP50 ?? row(.xprocess, .cSocketpairEpollCredentials)?.p50
        bars.append(bar("MessagePort cross-process ping-pong, senders pinned, p50 ≤ 1.15× C socketpair + epoll + credentials (SEQPACKET, two processes, alternating)",
                        crossProcess?.p50.flatMap { p50 in credentialsFloor.map { (p50, $0) } }) { p50, floor in
            var detail = String(format: "%.2f× (%.2f µs vs %.2f µs)", p50 / floor, p50, floor)
            if let pidfdRow {
                detail += String(format: "; C + SCM_PIDFD per packet %.2f µs (%.2f× the credentials row)", pidfdRow, pidfdRow / floor)
            }
            if let socketEpollFloor { detail += String(format: "; %.2f× C socketpair + epoll (%.2f µs)", p50 / socketEpollFloor, socketEpollFloor) }
            if let blockingRatio { detail += String(format: "; %.2f× blocking C socketpair", blockingRatio) }
            return (p50 <= 1.15 * floor, detail)
        })

        // The async bars (issue 11). The default actor runs in place on the caller's thread:
        // it says what the hop costs with no thread hand-off, not a rival for a loop's actor.
        let poolFloor = row(.actorhop, .defaultActor)?.p50
        bars.append(bar("LoopExecutor actor hop p50 below an actor on SwiftNIO's EventLoop executor",
                        row(.actorhop, .runLoopKit)?.p50.flatMap { p50 in row(.actorhop, .nio)?.p50.map { (p50, $0) } }) { p50, nio in
            (p50 < nio, String(format: "%.2f µs vs %.2f µs", p50, nio)
                + (poolFloor.map { String(format: " (default actor, no thread hand-off: %.2f µs)", $0) } ?? ""))
        })
        // The headline is the blocking sender, fed from a thread as AsyncStream's continuation
        // and NIO's source are; the async sender is reported beside it.
        let asyncSend = row(.asyncstream, .runLoopKitAsyncSend)?.messagesPerSecond
        bars.append(bar("MessagePort.messages() async stream throughput above AsyncStream",
                        row(.asyncstream, .runLoopKit)?.messagesPerSecond.flatMap { rate in
                            row(.asyncstream, .asyncStream)?.messagesPerSecond.map { (rate, $0) }
                        }) { rate, asyncStream in
            (rate > asyncStream, String(format: "%.2fM/s vs %.2fM/s", rate / 1e6, asyncStream / 1e6)
                + (asyncSend.map { String(format: " (from a task's await send: %.2fM/s)", $0 / 1e6) } ?? ""))
        })
        // Adding and removing an item does the same work however many the mode holds: callgrind's
        // instructions per operation, one thread. The wall time is reported beside them; it grows
        // with cache misses as the items outgrow the caches, not with work.
        let churnPoints = row(.churn, .runLoopKit).flatMap { result -> (ChurnPoint, ChurnPoint)? in
            guard let small = result.churn(items: 1_000, threads: 1), let large = result.churn(items: 100_000, threads: 1),
                  small.instructionsPerOperation != nil, large.instructionsPerOperation != nil else { return nil }
            return (small, large)
        }
        bars.append(bar("churn: instructions per add or remove at 100,000 items ≤ 1.1× at 1,000 (callgrind)",
                        churnPoints) { small, large in
            let ratio = large.instructionsPerOperation! / small.instructionsPerOperation!
            return (ratio <= 1.1, String(format: "%.2f× (%.0f → %.0f instructions); wall time %.0f → %.0f ns",
                                         ratio, small.instructionsPerOperation!, large.instructionsPerOperation!,
                                         small.nanosecondsPerOperation, large.nanosecondsPerOperation))
        })
        // A published name costs nothing after connect: the same frames on the same kind of
        // socket, plus the per-frame access check.
        bars.append(bar("MessagePort xnamed (request/reply over a published name) p50 ≤ 1.1× the socketpair xprocess row",
                        row(.xprocess, .runLoopKitNamed).flatMap { named in row(.xprocess, .runLoopKit).map { (named, $0) } }) { named, plain in
            guard let a = named.p50, let b = plain.p50, b > 0 else { return (false, "no p50") }
            return (a / b <= 1.1, String(format: "%.2f× (%.2f µs vs %.2f µs)", a / b, a, b))
        })
        // A distributed call is a request/reply over a published name, plus the envelope, the
        // JSON texts and the hops between each system's loop thread and the calling task.
        bars.append(bar("distributed call (one Int argument and result, two processes) p50 ≤ 1.5× the xnamed row",
                        row(.xprocess, .runLoopKitDistributed).flatMap { call in row(.xprocess, .runLoopKitNamed).map { (call, $0) } }) { call, named in
            guard let a = call.p50, let b = named.p50, b > 0 else { return (false, "no p50") }
            var detail = String(format: "%.2f× (%.2f µs vs %.2f µs); %.2f allocations per call (caller's side)",
                                a / b, a, b, call.allocationsPerMessage * 2)
            if let pinned = row(.xprocess, .runLoopKitDistributedPinned)?.p50 {
                detail += String(format: "; to an actor pinned to a resident thread %.2f µs (%.2f×)", pinned, pinned / b)
            }
            return (a / b <= 1.5, detail)
        })
        // What a C daemon author would use instead of a published port: a D-Bus method call with
        // sd-bus, peer to peer; through dbus-daemon, as most daemons are reached, beside it.
        let broker = row(.xprocess, .cSdBusBroker)?.p50
        let namedRow = row(.xprocess, .runLoopKitNamed)
        let sdBusFloor = namedRow?.referenceP50 ?? row(.xprocess, .cSdBus)?.p50
        bars.append(bar("MessagePort xnamed p50 ≤ 0.85× an sd-bus peer-to-peer method call (libsystemd, Echo(t) -> t, no broker, alternating)",
                        namedRow?.p50.flatMap { named in sdBusFloor.map { (named, $0) } }) { named, sdbus in
            var detail = String(format: "%.2f× (%.2f µs vs %.2f µs)", named / sdbus, named, sdbus)
            if let broker {
                detail += String(format: "; through dbus-daemon %.2f µs (xnamed %.2f× it)", broker, named / broker)
            } else {
                detail += "; dbus-daemon row not run"
            }
            return (named <= 0.85 * sdbus, detail)
        })
        // Across hosts, the bridge against grpc-swift's own echo over the same transport, configured
        // as the bridge configures it: a port delivers on its loop's thread, and the hand-offs that
        // costs are the bridge's price (built with the GRPC trait; otherwise not measured).
        let xhostDefaults = row(.xhost, .grpcEchoDefaults)?.p50
        bars.append(bar("xhost (gRPC bridge on loopback) p50 ≤ 1.4× grpc-swift's bidirectional echo",
                        row(.xhost, .runLoopKit)?.p50.flatMap { p50 in row(.xhost, .grpcEcho)?.p50.map { (p50, $0) } }) { p50, echo in
            (p50 <= 1.4 * echo, String(format: "%.2f× (%.2f µs vs %.2f µs)", p50 / echo, p50, echo)
                + (xhostDefaults.map { String(format: "; echo with gRPC's default flush coalescing %.2f µs", $0) } ?? ""))
        })
        bars.append(bar("xhost rate (\(GRPCBridgeWindow.roundTrips) round trips in flight) ≥ 1.5× grpc-swift's bidirectional echo",
                        row(.xhostrate, .runLoopKit)?.messagesPerSecond.flatMap { rate in
                            row(.xhostrate, .grpcEcho)?.messagesPerSecond.map { (rate, $0) }
                        }) { rate, echo in
            (rate >= 1.5 * echo, String(format: "%.2f× (%.0fk vs %.0fk round trips/s)", rate / echo, rate / 1e3, echo / 1e3))
        })
        // Third round, loop health: the hook costs nothing measurable when it is on. Compared with
        // RunLoopKit measured in alternation with it (`Interleaved`), not with the separate row.
        let health = [Workload.pingpong, .perform].compactMap { workload -> (Workload, Double, Double)? in
            guard let measured = row(workload, .runLoopKitHealth), let on = measured.p50, let off = measured.referenceP50 else { return nil }
            return (workload, on, off)
        }
        bars.append(bar("loop health: ping-pong and perform p50 with a slow-callout handler (10 ms) and a HangWatch ≤ 1.03× without",
                        health.count == 2 ? health : nil) { pairs in
            let detail = pairs.map { workload, on, off in
                String(format: "%@ %.2f× (%.2f µs vs %.2f µs, alternating in one process)", workload.rawValue, on / off, on, off)
            }.joined(separator: ", ")
            return (pairs.allSatisfy { $0.1 <= 1.03 * $0.2 }, detail)
        })
        // Fourth round, introspection: enabled with no tool attached costs nothing measurable;
        // a monitor attached keeps half the stream (the stream itself verifies that nothing is lost).
        let introspected = row(.pingpong, .runLoopKitIntrospection)
        let introspectedStream = row(.throughput, .runLoopKitIntrospection)
        let pair: (Double, Double, Double, Double)? = introspected.flatMap { ping in
            introspectedStream.flatMap { stream in
                guard let on = ping.p50, let off = ping.referenceP50, let rate = stream.messagesPerSecond,
                      let plain = stream.referenceMessagesPerSecond else { return nil }
                return (on, off, rate, plain)
            }
        }
        bars.append(bar("introspection enabled, no tool attached: ping-pong p50 ≤ 1.01× and throughput ≥ 1/1.01× without", pair) {
            on, off, rate, plain in
            (on <= 1.01 * off && rate * 1.01 >= plain,
             String(format: "ping-pong %.3f× (%.2f µs vs %.2f µs), throughput %.3f× (%.2fM/s vs %.2fM/s), alternating in one process",
                    on / off, on, off, rate / plain, rate / 1e6, plain / 1e6))
        })
        bars.append(bar("introspection: throughput with a monitor attached ≥ 0.5× without, nothing lost",
                        row(.throughput, .runLoopKitMonitored).flatMap { row in
                            row.messagesPerSecond.flatMap { rate in row.referenceMessagesPerSecond.map { (rate, $0) } }
                        }) { rate, plain in
            (rate >= 0.5 * plain, String(format: "%.2f× (%.2fM/s vs %.2fM/s, alternating in one process; every message verified)",
                                         rate / plain, rate / 1e6, plain / 1e6))
        })
        // Fourth round, tracing (Tracing trait): installed with no context current costs nothing
        // measurable; with every message in a context, a ping-pong pays an inject and an extract.
        func traced(_ workload: Workload, _ peer: Peer) -> (Double, Double)? {
            guard let measured = row(workload, peer) else { return nil }
            if let on = measured.p50, let off = measured.referenceP50 { return (on, off) }
            if let rate = measured.messagesPerSecond, let plain = measured.referenceMessagesPerSecond { return (plain, rate) }
            return nil
        }
        let installed = [(Workload.pingpong, "ping-pong"), (.throughput, "throughput")].compactMap { workload, name in
            traced(workload, .runLoopKitTracing).map { (name, $0.0, $0.1) }
        }
        bars.append(bar("tracing installed, no context at the send: ping-pong p50 and throughput within 1.01× of without",
                        installed.count == 2 ? installed : nil) { pairs in
            (pairs.allSatisfy { $0.1 <= 1.01 * $0.2 },
             pairs.map { String(format: "%@ %.3f×", $0.0, $0.1 / $0.2) }.joined(separator: ", ") + ", alternating in one process")
        })
        bars.append(bar("tracing: ping-pong p50 with every message in a trace context (a no-op tracer's traceparent) ≤ 1.15× without",
                        traced(.pingpong, .runLoopKitTraceContext)) { on, off in
            (on <= 1.15 * off, String(format: "%.2f× (%.2f µs vs %.2f µs, alternating in one process)", on / off, on, off))
        })
        bars += largeData(row)
        return bars
    }

    /// Fourth round, xlarge: at 16 MiB the two RunLoopKit rows against the C memfd floor measured
    /// in alternation with them (the ordinary Data against the floor plus the memcpy of the same
    /// alternation), and against sd-bus and the stream copy (their own processes: ratios of 4× and
    /// 10× are far beyond what a host's stretches move); SealedMemory's 256 MiB point against its
    /// 16 MiB one; the path `inlineDataLimit` chooses at 64 KiB against the inline path of 0.3.0, from the bisection.
    private static func largeData(_ row: (Workload, Peer) -> CaseResult?) -> [Bar] {
        let size = 16 << 20
        let sealed = row(.xlarge, .runLoopKitSealedMemory)?.point(size)
        let copied = row(.xlarge, .runLoopKit)?.point(size)
        let sdBus = row(.xlarge, .cSdBus)?.point(size)?.p50
        let stream = row(.xlarge, .cStreamCopy)?.point(size)?.p50
        var bars: [Bar] = []
        bars.append(bar("xlarge 16 MiB: a SealedMemory Data p50 ≤ 1.2× the C memfd floor (alternating)",
                        sealed.flatMap { point in point.referenceP50.map { (point.p50, $0) } }) { p50, floor in
            (p50 <= 1.2 * floor, String(format: "%.2f× (%.1f µs vs %.1f µs)", p50 / floor, p50, floor))
        })
        var copiedFigures: (p50: Double, floor: Double, copy: Double)?
        if let copied, let floor = copied.referenceP50, let copy = copied.besideP50 { copiedFigures = (copied.p50, floor, copy) }
        bars.append(bar("xlarge 16 MiB: an ordinary Data p50 ≤ 1.2× the C memfd floor plus one 16 MiB memcpy (alternating)",
                        copiedFigures) { figures in
            let sum = figures.floor + figures.copy
            let detail = String(format: "%.2f× (%.0f µs vs %.0f µs: floor %.1f µs + memcpy %.0f µs)",
                                figures.p50 / sum, figures.p50, sum, figures.floor, figures.copy)
            return (figures.p50 <= 1.2 * sum, detail)
        })
        func faster(_ name: String, _ peer: Double?, _ factor: Double) -> Bar {
            bar("xlarge 16 MiB: SealedMemory and ordinary Data both ≥ \(Int(factor))× faster than \(name)",
                sealed.flatMap { s in copied.flatMap { c in peer.map { (s.p50, c.p50, $0) } } }) { sealedP50, copiedP50, peer in
                (peer >= factor * max(sealedP50, copiedP50),
                 String(format: "%.0f× and %.1f× (%.0f µs vs %.1f µs and %.0f µs)", peer / sealedP50, peer / copiedP50,
                        peer, sealedP50, copiedP50))
            }
        }
        bars.append(faster("sd-bus p2p (ay)", sdBus, 10))
        bars.append(faster("the C SOCK_STREAM copy", stream, 4))
        let sealedRow = row(.xlarge, .runLoopKitSealedMemory)
        bars.append(bar("xlarge: a SealedMemory Data at 256 MiB p50 ≤ 2× its own 16 MiB p50",
                        sealedRow?.point(256 << 20).flatMap { large in sealed.map { (large, $0) } }) { large, medium in
            (large.p50 <= 2 * medium.p50, String(format: "%.2f× (%.1f µs vs %.1f µs)", large.p50 / medium.p50, large.p50, medium.p50)
                + (large.referenceP50.map { String(format: "; the C memfd floor at 256 MiB %.1f µs", $0) } ?? ""))
        })
        // 0.3.0 carried a Data up to a full frame inline. The path a 64 KiB Data takes now is the
        // one `inlineDataLimit` chooses: inline (the same path, measured in alternation with the
        // sealed one) when the limit reaches the frame's largest Data, else the sealed path.
        let bisection = row(.xlarge, .runLoopKitInlineBisection)
        let full = LargeData.largestInline
        let goesInline = full <= MessagePort.inlineDataLimit
        bars.append(bar("xlarge 64 KiB: the path inlineDataLimit chooses no slower than 0.3.0's inline path (≤ 1.05×, a \(full)-byte Data, alternating)",
                        bisection?.point(full).flatMap { point in point.referenceP50.map { (point, $0) } }) { point, inline in
            let chosen = goesInline ? inline : point.p50
            var detail = String(format: "%@ %.2f× (%.1f µs vs %.1f µs); the sealed path for it %.2f× (%.1f µs)",
                                goesInline ? "inline (limit \(MessagePort.inlineDataLimit) B)" : "sealed memory", chosen / inline,
                                chosen, inline, point.p50 / inline, point.p50)
            if let sealedMemory = point.besideP50 {
                detail += String(format: "; a SealedMemory Data %.2f× (%.1f µs)", sealedMemory / inline, sealedMemory)
            }
            detail += "; " + Table.bisectionVerdict(bisection?.scale ?? [])
            return (chosen <= 1.05 * inline, detail)
        })
        return bars
    }

    /// RunLoopKit's p50 below every one of `peers`' in `workload`.
    private static func below(_ name: String, _ mine: CaseResult?, _ peers: [Peer], _ workload: Workload,
                              _ row: (Workload, Peer) -> CaseResult?) -> Bar {
        bar(name, mine?.p50.flatMap { p50 in Self.peers(peers, workload, row).map { (p50, $0) } }) { p50, others in
            let best = others.compactMap(\.p50).min() ?? .infinity
            return (p50 < best, String(format: "%.2f µs vs best %.2f µs", p50, best))
        }
    }

    /// RunLoopKit's rate above every one of `peers`' in `workload`.
    private static func ahead(_ name: String, _ mine: CaseResult?, _ peers: [Peer], _ workload: Workload,
                              _ row: (Workload, Peer) -> CaseResult?) -> Bar {
        bar(name, mine?.messagesPerSecond.flatMap { rate in Self.peers(peers, workload, row).map { (rate, $0) } }) { rate, others in
            let best = others.compactMap(\.messagesPerSecond).max() ?? 0
            return (rate > best, String(format: "%.2fM/s vs best %.2fM/s", rate / 1e6, best / 1e6))
        }
    }

    /// All of `peers`' rows, or nil if any is missing.
    private static func peers(_ peers: [Peer], _ workload: Workload,
                              _ row: (Workload, Peer) -> CaseResult?) -> [CaseResult]? {
        let rows = peers.compactMap { row(workload, $0) }
        return rows.count == peers.count ? rows : nil
    }

    private static func bar<T>(_ name: String, _ input: T?, _ check: (T) -> (Bool, String)) -> Bar {
        guard let input else { return Bar(name: name, met: nil, detail: "not measured") }
        let (met, detail) = check(input)
        return Bar(name: name, met: met, detail: detail)
    }

    var line: String {
        let verdict = switch met {
        case true?: "MET    "
        case false?: "NOT MET"
        case nil: "—      "
        }
        return "  \(verdict)  \(name): \(detail)"
    }
}

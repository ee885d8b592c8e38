import Foundation

/// DESIGN §5's performance bars, checked against the pinned rows of this run (the
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

        let ping = row(.pingpong, .runLoopKit)
        bars.append(bar("MessagePort ping-pong p50 ≤ 1.3× \(Workload.pingpong.baseline.rawValue)",
                        ping.flatMap(report.ratio)) { ratio in (ratio <= 1.3, String(format: "%.2f×", ratio)) })
        let slowerSwift: [Peer] = [.foundation, .dispatch, .nio]
        bars.append(bar("MessagePort ping-pong p50 below Foundation RunLoop, DispatchQueue, SwiftNIO",
                        ping?.p50.flatMap { p50 in peers(slowerSwift, .pingpong, row).map { (p50, $0) } }) { p50, others in
            let best = others.compactMap(\.p50).min() ?? .infinity
            return (p50 < best, String(format: "%.2f µs vs best %.2f µs", p50, best))
        })

        let stream = row(.throughput, .runLoopKit)
        bars.append(bar("MessagePort throughput above SwiftNIO, DispatchQueue, Foundation RunLoop",
                        stream?.messagesPerSecond.flatMap { rate in peers(slowerSwift, .throughput, row).map { (rate, $0) } }) { rate, others in
            let best = others.compactMap(\.messagesPerSecond).max() ?? 0
            return (rate > best, String(format: "%.2fM/s vs best %.2fM/s", rate / 1e6, best / 1e6))
        })
        // The Swift Data ring says how far any Swift queue of `Data` gets: the floor under the bar.
        let floor = row(.throughput, .swiftRing).flatMap(report.ratio)
        bars.append(bar("MessagePort throughput ≥ 0.5× C ring + eventfd",
                        stream.flatMap(report.ratio)) { ratio in
            (ratio >= 0.5, String(format: "%.2f×", ratio)
                + (floor.map { String(format: " (Swift Data ring, no framework: %.2f×)", $0) } ?? ""))
        })
        bars.append(bar("MessagePort stream: memory flat (RSS growth ≤ 1 MiB), O(1) allocations per message",
                        stream.flatMap { s in s.rssGrowthBytes.map { (s, $0) } }) { s, growth in
            (growth <= 1 << 20, String(format: "RSS Δ %+.1f MiB over %d messages, %.2f allocs / %.0f B per message",
                                        Double(growth) / 1_048_576, s.messages, s.allocationsPerMessage, s.bytesPerMessage))
        })

        // Ratio to the workload's baseline, the C SEQPACKET socketpair ping-pong between processes.
        // The same C exchange asleep in epoll_wait says how much of the bar the kernel takes
        // from any event loop before it runs a line of its own.
        let epollFloor = row(.xprocess, .cSocketpairEpoll).flatMap(report.ratio)
        bars.append(bar("MessagePort cross-process ping-pong p50 ≤ 1.3× \(Workload.xprocess.baseline.rawValue) (SEQPACKET, two processes)",
                        row(.xprocess, .runLoopKit).flatMap(report.ratio)) { ratio in
            (ratio <= 1.3, String(format: "%.2f×", ratio)
                + (epollFloor.map { String(format: " (C socketpair + epoll, no framework: %.2f×)", $0) } ?? ""))
        })

        // DESIGN §2b's bars (issue 11). The default actor runs in place on the caller's thread:
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
        // Adding and removing an item costs the same however many the mode holds, with one
        // thread and with eight contending for the loop.
        let churnPairs = row(.churn, .runLoopKit).flatMap { result -> [(ChurnPoint, ChurnPoint)]? in
            let pairs = [1, 8].compactMap { threads in
                result.churn(items: 1_000, threads: threads).flatMap { small in
                    result.churn(items: 100_000, threads: threads).map { (small, $0) }
                }
            }
            return pairs.count == 2 ? pairs : nil
        }
        bars.append(bar("churn: ns/op at 100,000 within 1.5× of that at 1,000", churnPairs) { pairs in
            let ratios = pairs.map { $0.1.nanosecondsPerOperation / $0.0.nanosecondsPerOperation }
            let detail = zip(pairs, ratios).map { pair, ratio in
                "\(pair.0.threads) thread\(pair.0.threads == 1 ? "" : "s"): "
                    + String(format: "%.2f× (%.0f → %.0f ns)", ratio, pair.0.nanosecondsPerOperation, pair.1.nanosecondsPerOperation)
            }.joined(separator: ", ")
            return (ratios.allSatisfy { $0 <= 1.5 }, detail)
        })
        // A published name costs nothing after connect: the same frames on the same kind of
        // socket, plus the per-frame access check.
        bars.append(bar("MessagePort xnamed (request/reply over a published name) p50 ≤ 1.1× the socketpair xprocess row",
                        row(.xprocess, .runLoopKitNamed).flatMap { named in row(.xprocess, .runLoopKit).map { (named, $0) } }) { named, plain in
            guard let a = named.p50, let b = plain.p50, b > 0 else { return (false, "no p50") }
            return (a / b <= 1.1, String(format: "%.2f× (%.2f µs vs %.2f µs)", a / b, a, b))
        })
        return bars
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

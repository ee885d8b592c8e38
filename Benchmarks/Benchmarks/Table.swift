import Foundation
import RunLoopKit

/// The human-readable table: one row per case, every peer side by side.
enum Table {
    private struct Column: Sendable {
        var title: String
        var width: Int
        var leftAligned = false
        var value: @Sendable (Report, CaseResult) -> String
    }

    private static let columns: [Column] = [
        Column(title: "workload", width: Workload.allCases.map(\.rawValue.count).max()!, leftAligned: true) { _, r in r.benchmarkCase.workload.rawValue },
        Column(title: "regime", width: 8, leftAligned: true) { _, r in r.benchmarkCase.regime.rawValue },
        Column(title: "peer", width: Peer.allCases.map(\.rawValue.count).max()!, leftAligned: true) { _, r in r.benchmarkCase.peer.rawValue },
        Column(title: "p50 µs", width: 8) { _, r in micros(r.p50) },
        Column(title: "p99 µs", width: 8) { _, r in micros(r.p99) },
        Column(title: "p99.9 µs", width: 9) { _, r in micros(r.p999) },
        Column(title: "mean µs", width: 8) { _, r in micros(r.mean) },
        Column(title: "msgs/s", width: 9) { _, r in rate(r.messagesPerSecond) },
        Column(title: "×C", width: 6) { report, r in report.ratio(r).map { String(format: "%.2f", $0) } ?? "—" },
        Column(title: "allocs/msg", width: 10) { _, r in String(format: "%.2f", r.allocationsPerMessage) },
        Column(title: "B/msg", width: 7) { _, r in String(format: "%.0f", r.bytesPerMessage) },
        Column(title: "same CPU", width: 8) { _, r in r.sameCPUShare.map { String(format: "%.0f%%", $0 * 100) } ?? "—" },
        Column(title: "peak RSS", width: 9) { _, r in mebibytes(r.peakRSSBytes) },
        Column(title: "RSS Δ", width: 9) { _, r in r.rssGrowthBytes.map(mebibytes) ?? "—" },
    ]

    static func render(_ report: Report) -> String {
        var lines = [report.machine.line + (report.quick ? " (--quick)" : "")]
        lines.append("""
            pingpong: round trip, 8-byte payload; idle: RunLoopKit's pingpong with 1,000 idle ports, \
            1,000 far-future timers and 100 idle fd sources in the mode of both threads; perform: \
            one-way wake-up latency; throughput: 64-byte payloads, queue bound 1024; fanin: the same \
            stream from 4 sender threads into one queue (bound 1024; the Swift peers' credit windows \
            256 per sender), each sender's order checked; xprocess: round trip, 8-byte payload, \
            between two processes; churn: adding then removing items of one mode (its own table below).
            actorhop: `await` round trip, 8-byte payload, from a task on the cooperative pool to an \
            actor on a resident thread's executor (RunLoopKit), on a NIO event loop's executor \
            (SwiftNIO), or on the pool (default actor, which runs in place: no thread hand-off). \
            asyncstream: 64-byte payloads from a sender thread to a task's `for await`, 1024 in \
            flight: MessagePort.messages() (queueLimit 1024, blocking send), NIOAsyncSequenceProducer \
            (watermarks 512/1024), AsyncStream (unbounded, held to 1024 by a credit window: it has no \
            backpressure, and its bounded policies drop); "RunLoopKit async send" sends from a task \
            with `await port.send`. Pinned: the whole process, cooperative pool included, on CPU 0.
            ×C: p50 ÷ C eventfd's p50 (latency; lower is better), msgs/s ÷ C ring + eventfd's \
            (throughput, fanin: its 4-sender variant, asyncstream; higher is better), same workload \
            and regime; for xprocess, p50 ÷ C socketpair's.
            Reference rows (floors to read the others against, not peers; see Benchmarks/README.md): \
            C futex and C eventfd + epoll (pingpong, idle: the kernel's floors under RunLoopKit's \
            futex and epoll sleeps), Swift Data ring and Swift [Component] ring (throughput), \
            C socketpair + epoll, the same reading each packet's sender credentials, and receiving \
            a pidfd of each packet's sender too (SCM_PIDFD) (xprocess).
            xprocess also has C sd-bus p2p, a D-Bus method call Echo(t) -> t over a socketpair \
            (libsystemd, no broker), and the same call through a private dbus-daemon.
            allocs/msg, B/msg: whole process, steady state, per one-way message. \
            same CPU: share of samples with both threads (processes, for xprocess) on one CPU. \
            RSS Δ: growth over the stream after warm-up. \
            Pinned latency rows: the better p50 of two processes run apart, half the budget each.
            """)
        lines.append("")
        lines.append(row(columns.map(\.title)))
        var previousGroup: (Workload, Regime)?
        for result in report.results where !result.benchmarkCase.workload.isScale && !result.benchmarkCase.workload.isSized {
            let group = (result.benchmarkCase.workload, result.benchmarkCase.regime)
            if let previousGroup, previousGroup != group { lines.append("") }
            previousGroup = group
            lines.append(row(columns.map { $0.value(report, result) }))
        }
        lines += scaleLines(report)
        lines += largeDataLines(report)
        lines += bisectionLines(report)
        lines += churnLines(report)
        return lines.joined(separator: "\n")
    }

    /// The scale rows, one line per point: p50 and p99 of a round trip, round trips per
    /// second (all pairs together for `threads`), and p50 over the row's first point.
    private static func scaleLines(_ report: Report) -> [String] {
        let rows = report.results.filter { $0.scale != nil && $0.benchmarkCase.workload.isScale }
        guard !rows.isEmpty else { return [] }
        let widths = [9, 8, 10, 9, 9, 13, 7, 10, 9]
        func cells(_ values: [String]) -> String {
            zip(widths, values).enumerated().map { index, pair in
                let padding = String(repeating: " ", count: max(pair.0 - pair.1.count, 0))
                return index < 2 ? pair.1 + padding : padding + pair.1
            }.joined(separator: "  ")
        }
        var lines = ["", """
            scale (reported, not bars; RunLoopKit only): payloads: pingpong carrying one shared Data \
            of each size (sequence number as the msgid); xpayloads: xprocess carrying one block of \
            each size, up to the largest DATA component a frame holds; threads: that many pairs of \
            resident threads ping-ponging at once, p50 over every pair's round trips, rate of all \
            pairs together. ×first: p50 over the row's first point. allocs/msg, B/msg: whole process \
            (this one, for xpayloads), per one-way message: a payload copied shows as its size.
            """]
        lines.append(cells(["workload", "regime", "point", "p50 µs", "p99 µs", "round trips/s", "×first",
                            "allocs/msg", "B/msg"]))
        for result in rows {
            let points = result.scale!
            for point in points {
                let label = result.benchmarkCase.workload == .threads
                    ? "\(point.parameter) pair\(point.parameter == 1 ? "" : "s")" : bytes(point.parameter)
                let first = points.first!.p50
                lines.append(cells([result.benchmarkCase.workload.rawValue, result.benchmarkCase.regime.rawValue, label,
                                    micros(point.p50), micros(point.p99), rate(point.roundTripsPerSecond),
                                    first > 0 ? String(format: "%.2f", point.p50 / first) : "—",
                                    String(format: "%.2f", point.allocationsPerMessage),
                                    String(format: "%.0f", point.bytesPerMessage)]))
            }
        }
        return lines
    }

    /// The xlarge rows, one line per size and peer: the interleaved rows' ×floor against the floor
    /// measured in alternation with them (its p50 in the `floor µs` column), the others' against
    /// the C memfd row; under the ordinary Data, the memcpy measured in the same alternation and
    /// the sum its bar reads.
    private static func largeDataLines(_ report: Report) -> [String] {
        let rows = report.results.filter { $0.benchmarkCase.workload == .xlarge && $0.benchmarkCase.peer != .runLoopKitInlineBisection }
        guard !rows.isEmpty else { return [] }
        let widths = [8, 8, 32, 10, 10, 7, 10, 10, 9]
        func cells(_ values: [String]) -> String {
            zip(widths, values).enumerated().map { index, pair in
                let padding = String(repeating: " ", count: max(pair.0 - pair.1.count, 0))
                return index < 3 ? pair.1 + padding : padding + pair.1
            }.joined(separator: "  ")
        }
        var lines = ["", """
            xlarge: a Data of N bytes to another process and an 8-byte acknowledgement; the receiver \
            reads the first and last byte. C memfd + SCM_RIGHTS is the floor: per message memfd_create, \
            the two bytes written through a shared mapping, F_ADD_SEALS, sendmsg with SCM_RIGHTS; the \
            receiver checks size and seals, maps, reads, unmaps, closes, acknowledges. RunLoopKit \
            SealedMemory makes each message's Data with SealedMemory.data (inside the round, as the \
            floor's create, write and seal are); RunLoopKit sends one ordinary Data, which the transport \
            copies into new sealed memory. Both alternate with the floor in one process: their ×floor is \
            p50 ÷ that floor's p50 (floor µs); the other rows' is p50 ÷ the C memfd row's. memcpy of N \
            (into new memory) alternates with the ordinary Data too. sd-bus: Take(t, t, ay) -> t, p2p.
            """]
        lines.append(cells(["regime", "size", "peer", "p50 µs", "p99 µs", "×floor", "floor µs", "allocs/msg", "B/msg"]))
        let regimes = Regime.allCases.filter { regime in rows.contains { $0.benchmarkCase.regime == regime } }
        for regime in regimes {
            let regimeRows = rows.filter { $0.benchmarkCase.regime == regime }
            let floorRow = regimeRows.first { $0.benchmarkCase.peer == .cMemfd }
            let sizes = Array(Set(regimeRows.flatMap { $0.scale ?? [] }.map(\.parameter))).sorted()
            for size in sizes {
                var label = bytes(size)
                for result in regimeRows {
                    guard let point = result.point(size) else { continue }
                    let floor = point.referenceP50 ?? floorRow?.point(size)?.p50
                    lines.append(cells([regime.rawValue, label, result.benchmarkCase.peer == .runLoopKit ? "RunLoopKit (ordinary Data)" : result.benchmarkCase.peer.rawValue,
                                        micros(point.p50), micros(point.p99),
                                        floor.map { String(format: "%.2f", point.p50 / $0) } ?? "—",
                                        point.referenceP50.map { micros($0) } ?? "",
                                        String(format: "%.2f", point.allocationsPerMessage),
                                        String(format: "%.0f", point.bytesPerMessage)]))
                    label = ""
                    if let copy = point.besideP50, let floor = point.referenceP50 {
                        lines.append(cells(["", "", "  memcpy of N (alternating)", micros(copy), "", "", "", "", ""]))
                        lines.append(cells(["", "", "  floor + memcpy", micros(floor + copy), "",
                                            String(format: "%.2f", point.p50 / (floor + copy)), "", "", ""]))
                    }
                }
            }
        }
        return lines
    }

    /// The bisection of `inlineDataLimit`: per size, the inline path against the sealed path (the
    /// same ordinary Data, copied into sealed memory at the send) and a SealedMemory Data, and
    /// from which size on each sealed path is no slower.
    private static func bisectionLines(_ report: Report) -> [String] {
        let rows = report.results.filter { $0.benchmarkCase.workload == .xlarge && $0.benchmarkCase.peer == .runLoopKitInlineBisection }
        guard !rows.isEmpty else { return [] }
        let widths = [8, 9, 7, 11, 14, 9, 16, 9]
        func cells(_ values: [String]) -> String {
            zip(widths, values).enumerated().map { index, pair in
                let padding = String(repeating: " ", count: max(pair.0 - pair.1.count, 0))
                return index < 1 ? pair.1 + padding : padding + pair.1
            }.joined(separator: "  ")
        }
        var lines = ["", """
            inlineDataLimit bisection (RunLoopKit, two processes): at each size the same ordinary Data \
            sent inline (the frame holds it) and as sealed memory (copied into a new memfd at the send), \
            and a SealedMemory Data made per message, alternating in one process; p50 µs of a round \
            trip with an 8-byte acknowledgement. The limit is \(MessagePort.inlineDataLimit) bytes.
            """]
        lines.append(cells(["regime", "Data B", "frame", "inline µs", "sealed µs", "×inline", "SealedMemory µs", "×inline"]))
        for result in rows {
            let points = result.scale ?? []
            for point in points {
                let inline = point.referenceP50
                lines.append(cells([result.benchmarkCase.regime.rawValue, "\(point.parameter)",
                                    bytes(point.parameter + LargeData.frameHeadroom),
                                    inline.map { micros($0) } ?? "—", micros(point.p50),
                                    inline.map { String(format: "%.2f", point.p50 / $0) } ?? "—",
                                    point.besideP50.map { micros($0) } ?? "—",
                                    inline.flatMap { inline in point.besideP50.map { String(format: "%.2f", $0 / inline) } } ?? "—"]))
            }
            lines.append("  " + bisectionVerdict(points))
        }
        return lines
    }

    /// Where each sealed path stops being slower than the inline path, and what that says of the
    /// limit: it is right when the first size above it is the first from which sealed is no slower.
    static func bisectionVerdict(_ points: [ScalePoint]) -> String {
        let limit = MessagePort.inlineDataLimit
        func from(_ crossover: Int?) -> String {
            crossover.map { "from \($0) B (frame \(bytes($0 + LargeData.frameHeadroom))) on" } ?? "at no size measured"
        }
        let copied = LargeData.crossover(points) { $0.p50 }
        let sealedMemory = LargeData.crossover(points) { $0.besideP50 }
        let below = points.filter { $0.parameter <= limit }.map(\.parameter).max()
        let above = points.filter { $0.parameter > limit }.map(\.parameter).min()
        let verdict: String
        switch copied {
        case nil where limit >= LargeData.largestInline:
            verdict = "sealed is slower at every size up to a full frame: the limit at the frame's largest Data (\(limit) B) is right"
        case nil:
            verdict = "sealed is slower at every size up to a full frame: the limit would be best at the frame's largest Data"
        case let crossover? where crossover == above:
            verdict = "the limit (\(limit) B) lies between the last size where inline wins and the first where sealed is no slower: consistent"
        case let crossover? where below != nil && crossover <= below!:
            verdict = "sealed is already no slower at \(crossover) B, at or below the limit (\(limit) B): a lower limit would do as well"
        case let crossover?:
            verdict = "inline still wins above the limit (\(limit) B) up to \(crossover) B: the limit is too low by this run"
        }
        return "sealed (ordinary Data, copied) no slower than inline \(from(copied)); SealedMemory Data \(from(sealedMemory)). \(verdict)."
    }

    /// A payload size: bytes, KiB or MiB when exact.
    static func bytes(_ count: Int) -> String {
        if count >= 1 << 20 && count % (1 << 20) == 0 { return "\(count >> 20) MiB" }
        if count >= 1 << 10 && count % (1 << 10) == 0 { return "\(count >> 10) KiB" }
        return "\(count) B"
    }

    /// The churn points, one line per size, a column per thread count.
    private static func churnLines(_ report: Report) -> [String] {
        let rows = report.results.filter { $0.churn != nil }
        guard let first = rows.first?.churn else { return [] }
        let threadCounts = Array(Set(first.map(\.threads))).sorted()
        func cells(_ values: [String]) -> String {
            values.enumerated().map { index, value in
                let width = index == 0 ? 10 : 12
                let padding = String(repeating: " ", count: max(width - value.count, 0))
                return index == 0 ? value + padding : padding + value
            }.joined(separator: "  ")
        }
        var lines = ["", """
            churn: ns per add or remove, median window; N items of one mode (Source0s, far-future \
            timers, one MessagePort in eight) added then removed in random order, the loop not running; \
            instr/op: callgrind's instructions per add or remove, one thread.
            """]
        lines.append(cells(["regime", "items"] + threadCounts.map { $0 == 1 ? "1 thread" : "\($0) threads" }
                           + ["instr/op"]))
        for result in rows {
            for items in Array(Set(result.churn!.map(\.items))).sorted() {
                let values = threadCounts.map { threads in
                    result.churn(items: items, threads: threads).map { String(format: "%.0f", $0.nanosecondsPerOperation) } ?? "—"
                }
                let instructions = result.churn(items: items, threads: 1)?.instructionsPerOperation
                lines.append(cells([result.benchmarkCase.regime.rawValue, "\(items)"] + values
                                   + [instructions.map { String(format: "%.0f", $0) } ?? "—"]))
            }
        }
        return lines
    }

    private static func row(_ cells: [String]) -> String {
        zip(columns, cells).map { column, cell in
            let padding = String(repeating: " ", count: max(column.width - cell.count, 0))
            return column.leftAligned ? cell + padding : padding + cell
        }.joined(separator: "  ")
    }

    private static func micros(_ value: Double?) -> String {
        guard let value else { return "—" }
        return String(format: value < 100 ? "%.2f" : "%.0f", value)
    }

    private static func rate(_ value: Double?) -> String {
        guard let value else { return "—" }
        return value >= 1e6 ? String(format: "%.2fM", value / 1e6) : String(format: "%.0fk", value / 1e3)
    }

    private static func mebibytes(_ bytes: Int64) -> String {
        String(format: "%.1f MiB", Double(bytes) / 1_048_576)
    }
}

import Foundation

/// `--json PATH`: the table's data, built by hand (the shape is small and fixed).
///
/// `{"machine": {…}, "quick": Bool, "results": [{"workload", "peer", "regime",
/// "p50_us", "p99_us", "p999_us", "mean_us", "msgs_per_s", "ratio_to_c", "baseline",
/// "allocs_per_msg", "bytes_per_msg", "same_cpu_share", "samples", "messages",
/// "peak_rss_bytes", "rss_growth_bytes", "reference_p50_us", "reference_msgs_per_s"}], "references": [same shape], "scale": [{"workload",
/// "regime", "point", "p50_us", "p99_us", "round_trips_per_s", "allocs_per_msg", "bytes_per_msg"}], "xlarge": [{"peer",
/// "regime", "bytes", "p50_us", "p99_us", "reference_p50_us", "beside_p50_us", "allocs_per_msg", "bytes_per_msg"}],
/// "churn": [{"regime", "items", "threads", "ns_per_op", "instructions_per_op"}], "bars": [{"bar", "met", "detail"}]}`.
/// A scale point is a payload size in bytes (`payloads`, `xpayloads`) or a number of thread pairs
/// (`threads`). An xlarge point's `reference_p50_us` is the C memfd floor measured in alternation
/// with it (for the bisection row, the inline path), `beside_p50_us` the third configuration of
/// that alternation (memcpy of N; for the bisection, a SealedMemory Data).
/// `Chart` reads this shape back (`--from-json`). `references` holds the rows of reference peers
/// (`Peer.isReference`: the Swift Data and [Component] rings, C futex, C eventfd + epoll,
/// C socketpair + epoll with and without credentials), kept out of `results` so that `results` names only the peers the
/// benchmark compares.
/// A latency row has null msgs_per_s; a throughput row null percentiles. `reference_p50_us` and
/// `reference_msgs_per_s` are null except for an interleaved row (the loop-health rows,
/// RunLoopKit's fan-in row, the Swift Data ring's row): its reference's p50 or rate, measured in
/// alternation with it. `ratio_to_c` is
/// relative to the peer named by `baseline` (the workload's C baseline).
enum JSONReport {
    static func render(_ report: Report, bars: [Bar]) -> String {
        let machine = object([
            ("cpu", string(report.machine.cpuModel)), ("cores", "\(report.machine.cores)"),
            ("kernel", string(report.machine.kernel)), ("arch", string(report.machine.architecture)),
        ])
        func row(_ r: CaseResult) -> String {
            object([
                ("workload", string(r.benchmarkCase.workload.rawValue)),
                ("peer", string(r.benchmarkCase.peer.rawValue)),
                ("regime", string(r.benchmarkCase.regime.rawValue)),
                ("p50_us", number(r.p50)), ("p99_us", number(r.p99)), ("p999_us", number(r.p999)),
                ("mean_us", number(r.mean)), ("msgs_per_s", number(r.messagesPerSecond)),
                ("ratio_to_c", number(report.ratio(r))),
                ("baseline", string(r.benchmarkCase.workload.baseline.rawValue)),
                ("allocs_per_msg", number(r.allocationsPerMessage)), ("bytes_per_msg", number(r.bytesPerMessage)),
                ("same_cpu_share", number(r.sameCPUShare)), ("samples", r.samples.map { "\($0)" } ?? "null"),
                ("messages", "\(r.messages)"), ("peak_rss_bytes", "\(r.peakRSSBytes)"),
                ("rss_growth_bytes", r.rssGrowthBytes.map { "\($0)" } ?? "null"),
                ("reference_p50_us", number(r.referenceP50)),
                ("reference_msgs_per_s", number(r.referenceMessagesPerSecond)),
            ])
        }
        let rows = report.results.filter { !$0.benchmarkCase.workload.isScale && !$0.benchmarkCase.workload.isSized }
        let results = rows.filter { !$0.benchmarkCase.peer.isReference }.map(row)
        let references = rows.filter { $0.benchmarkCase.peer.isReference }.map(row)
        let scale = report.results.filter { $0.benchmarkCase.workload.isScale }.flatMap { result in
            (result.scale ?? []).map { point in
                object([("workload", string(result.benchmarkCase.workload.rawValue)),
                        ("regime", string(result.benchmarkCase.regime.rawValue)),
                        ("point", "\(point.parameter)"), ("p50_us", number(point.p50)), ("p99_us", number(point.p99)),
                        ("round_trips_per_s", number(point.roundTripsPerSecond)),
                        ("allocs_per_msg", number(point.allocationsPerMessage)),
                        ("bytes_per_msg", number(point.bytesPerMessage))])
            }
        }
        let largeData = report.results.filter { $0.benchmarkCase.workload.isSized }.flatMap { result in
            (result.scale ?? []).map { point in
                object([("peer", string(result.benchmarkCase.peer.rawValue)),
                        ("regime", string(result.benchmarkCase.regime.rawValue)),
                        ("bytes", "\(point.parameter)"), ("p50_us", number(point.p50)), ("p99_us", number(point.p99)),
                        ("reference_p50_us", number(point.referenceP50)), ("beside_p50_us", number(point.besideP50)),
                        ("allocs_per_msg", number(point.allocationsPerMessage)),
                        ("bytes_per_msg", number(point.bytesPerMessage))])
            }
        }
        let churn = report.results.flatMap { result in
            (result.churn ?? []).map { point in
                object([("regime", string(result.benchmarkCase.regime.rawValue)), ("items", "\(point.items)"),
                        ("threads", "\(point.threads)"), ("ns_per_op", number(point.nanosecondsPerOperation)),
                        ("instructions_per_op", number(point.instructionsPerOperation))])
            }
        }
        let barObjects = bars.map { bar in
            object([("bar", string(bar.name)), ("met", bar.met.map { "\($0)" } ?? "null"),
                    ("detail", string(bar.detail))])
        }
        return object([
            ("machine", machine), ("quick", "\(report.quick)"),
            ("results", "[\n    " + results.joined(separator: ",\n    ") + "\n  ]"),
            ("references", "[\n    " + references.joined(separator: ",\n    ") + "\n  ]"),
            ("scale", "[\n    " + scale.joined(separator: ",\n    ") + "\n  ]"),
            ("xlarge", "[\n    " + largeData.joined(separator: ",\n    ") + "\n  ]"),
            ("churn", "[\n    " + churn.joined(separator: ",\n    ") + "\n  ]"),
            ("bars", "[\n    " + barObjects.joined(separator: ",\n    ") + "\n  ]"),
        ], top: true) + "\n"
    }

    private static func object(_ members: [(String, String)], top: Bool = false) -> String {
        let body = members.map { "\(string($0.0)): \($0.1)" }
        return top ? "{\n  " + body.joined(separator: ",\n  ") + "\n}" : "{" + body.joined(separator: ", ") + "}"
    }

    private static func number(_ value: Double?) -> String {
        guard let value, value.isFinite else { return "null" }
        return "\(value)"
    }

    private static func string(_ text: String) -> String {
        var escaped = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped += "\\\""
            case "\\": escaped += "\\\\"
            case "\n": escaped += "\\n"
            case _ where scalar.value < 0x20: escaped += String(format: "\\u%04x", scalar.value)
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "\""
    }
}

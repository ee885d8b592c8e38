import Foundation

/// One row of the table: the summary a child process computes for its case and
/// hands to the parent as a single `RESULT key=value …` line on stdout.
struct CaseResult: Sendable {
    var benchmarkCase: BenchmarkCase
    // Latency rows (microseconds); nil for throughput rows.
    var p50: Double?
    var p99: Double?
    var p999: Double?
    var mean: Double?
    var samples: Int?
    /// Share of samples during which both threads were on the same CPU.
    var sameCPUShare: Double?
    /// An interleaved row's (`BenchmarkCase.interleavedReference`): the p50 of its reference
    /// configuration, measured in alternation with it in the same process.
    var referenceP50: Double?
    // Throughput rows; nil for latency rows.
    var messagesPerSecond: Double?
    /// An interleaved stream row's (`BenchmarkCase.interleavedReference`): the rate of its
    /// reference configuration, measured in alternation with it in the same process.
    var referenceMessagesPerSecond: Double?
    /// RSS growth from the end of the warm-up to the end of the stream.
    var rssGrowthBytes: Int64?
    // Churn rows; nil for the others. `messages` and the allocations count its operations.
    var churn: [ChurnPoint]?
    // Scale and xlarge rows (a point per size); nil for the others.
    var scale: [ScalePoint]?
    // Every row.
    var messages: Int
    var allocationsPerMessage: Double
    var bytesPerMessage: Double
    /// getrusage(RUSAGE_SELF).ru_maxrss of the child, which ran only this case.
    var peakRSSBytes: Int64

    /// Whether this run measured its case faster than `other`, an earlier run of the same case:
    /// a lower p50, or a higher rate.
    func isFaster(than other: CaseResult) -> Bool {
        if let p50 { return p50 < other.p50 ?? .infinity }
        if let messagesPerSecond { return messagesPerSecond > other.messagesPerSecond ?? 0 }
        return false
    }

    init(_ benchmarkCase: BenchmarkCase, latency summary: LatencySummary, measurement: LatencyMeasurement) {
        self.benchmarkCase = benchmarkCase
        p50 = summary.p50
        p99 = summary.p99
        p999 = summary.p999
        mean = summary.mean
        samples = summary.count
        sameCPUShare = Double(measurement.sameCPU) / Double(max(measurement.count, 1))
        messages = measurement.messages
        allocationsPerMessage = measurement.allocations.allocationsPerMessage(measurement.messages)
        bytesPerMessage = measurement.allocations.bytesPerMessage(measurement.messages)
        peakRSSBytes = Self.peakRSS()
    }

    init(_ benchmarkCase: BenchmarkCase, stream measurement: StreamMeasurement) {
        self.benchmarkCase = benchmarkCase
        messagesPerSecond = measurement.messagesPerSecond
        rssGrowthBytes = Int64(measurement.rssEnd) - Int64(measurement.rssBegin)
        messages = measurement.messages
        allocationsPerMessage = measurement.allocations.allocationsPerMessage(measurement.messages)
        bytesPerMessage = measurement.allocations.bytesPerMessage(measurement.messages)
        peakRSSBytes = Self.peakRSS()
    }

    init(_ benchmarkCase: BenchmarkCase, churn measurement: ChurnMeasurement) {
        self.benchmarkCase = benchmarkCase
        churn = measurement.points
        messages = measurement.operations
        allocationsPerMessage = measurement.allocations.allocationsPerMessage(measurement.operations)
        bytesPerMessage = measurement.allocations.bytesPerMessage(measurement.operations)
        peakRSSBytes = Self.peakRSS()
    }

    init(_ benchmarkCase: BenchmarkCase, scale measurement: ScaleMeasurement) {
        self.benchmarkCase = benchmarkCase
        scale = measurement.points
        messages = measurement.messages
        allocationsPerMessage = measurement.allocations.allocationsPerMessage(measurement.messages)
        bytesPerMessage = measurement.allocations.bytesPerMessage(measurement.messages)
        peakRSSBytes = Self.peakRSS()
    }

    /// The scale or xlarge point of `parameter` (a size in bytes, or a number of pairs), if measured.
    func point(_ parameter: Int) -> ScalePoint? {
        scale?.first { $0.parameter == parameter }
    }

    /// The churn point of `items` items and `threads` threads, if measured.
    func churn(items: Int, threads: Int) -> ChurnPoint? {
        churn?.first { $0.items == items && $0.threads == threads }
    }

    private static func peakRSS() -> Int64 {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Int64(usage.ru_maxrss) * 1024  // Linux reports kilobytes
    }

    // ---- The child → parent line ----------------------------------------------------

    static let linePrefix = "RESULT "

    var line: String {
        var fields: [(String, String?)] = [
            ("p50", p50.map { "\($0)" }), ("p99", p99.map { "\($0)" }), ("p999", p999.map { "\($0)" }),
            ("mean", mean.map { "\($0)" }), ("samples", samples.map { "\($0)" }),
            ("same_cpu", sameCPUShare.map { "\($0)" }), ("reference_p50", referenceP50.map { "\($0)" }),
            ("msgs_per_s", messagesPerSecond.map { "\($0)" }),
            ("reference_msgs_per_s", referenceMessagesPerSecond.map { "\($0)" }),
            ("rss_growth", rssGrowthBytes.map { "\($0)" }),
            // items x threads : ns per operation [: instructions per operation], comma-separated
            ("churn", churn.map { points in
                points.map { point in
                    "\(point.items)x\(point.threads):\(point.nanosecondsPerOperation)"
                        + (point.instructionsPerOperation.map { ":\($0)" } ?? "")
                }.joined(separator: ",")
            }),
            // parameter : p50 : p99 : round trips per second : allocs : bytes [: reference p50 : beside p50]
            // ("-" where absent), comma-separated
            ("scale", scale.map { points in
                points.map { point in
                    "\(point.parameter):\(point.p50):\(point.p99):\(point.roundTripsPerSecond):\(point.allocationsPerMessage):\(point.bytesPerMessage)"
                        + (point.referenceP50 == nil && point.besideP50 == nil ? ""
                           : ":" + [point.referenceP50, point.besideP50].map { $0.map { "\($0)" } ?? "-" }.joined(separator: ":"))
                }.joined(separator: ",")
            }),
        ]
        fields += [("messages", "\(messages)"), ("allocs", "\(allocationsPerMessage)"),
                   ("bytes", "\(bytesPerMessage)"), ("peak_rss", "\(peakRSSBytes)")]
        return Self.linePrefix + fields.compactMap { key, value in value.map { "\(key)=\($0)" } }
            .joined(separator: " ")
    }

    init?(line: String, for benchmarkCase: BenchmarkCase) {
        guard line.hasPrefix(Self.linePrefix) else { return nil }
        var values: [String: String] = [:]
        for field in line.dropFirst(Self.linePrefix.count).split(separator: " ") {
            let pair = field.split(separator: "=", maxSplits: 1).map(String.init)
            guard pair.count == 2 else { return nil }
            values[pair[0]] = pair[1]
        }
        guard let messages = values["messages"].flatMap({ Int($0) }),
              let allocations = values["allocs"].flatMap({ Double($0) }),
              let bytes = values["bytes"].flatMap({ Double($0) }),
              let peakRSS = values["peak_rss"].flatMap({ Int64($0) }) else { return nil }
        self.benchmarkCase = benchmarkCase
        p50 = values["p50"].flatMap { Double($0) }
        p99 = values["p99"].flatMap { Double($0) }
        p999 = values["p999"].flatMap { Double($0) }
        mean = values["mean"].flatMap { Double($0) }
        samples = values["samples"].flatMap { Int($0) }
        sameCPUShare = values["same_cpu"].flatMap { Double($0) }
        referenceP50 = values["reference_p50"].flatMap { Double($0) }
        messagesPerSecond = values["msgs_per_s"].flatMap { Double($0) }
        referenceMessagesPerSecond = values["reference_msgs_per_s"].flatMap { Double($0) }
        rssGrowthBytes = values["rss_growth"].flatMap { Int64($0) }
        churn = values["churn"].map { text in
            text.split(separator: ",").compactMap { point in
                let parts = point.split(whereSeparator: { $0 == "x" || $0 == ":" })
                guard parts.count == 3 || parts.count == 4, let items = Int(parts[0]), let threads = Int(parts[1]),
                      let nanoseconds = Double(parts[2]) else { return nil }
                return ChurnPoint(items: items, threads: threads, nanosecondsPerOperation: nanoseconds,
                                  instructionsPerOperation: parts.count == 4 ? Double(parts[3]) : nil)
            }
        }
        scale = values["scale"].map { text in
            text.split(separator: ",").compactMap { point in
                let parts = point.split(separator: ":")
                guard parts.count == 6 || parts.count == 8, let parameter = Int(parts[0]), let p50 = Double(parts[1]),
                      let p99 = Double(parts[2]), let rate = Double(parts[3]),
                      let allocations = Double(parts[4]), let bytes = Double(parts[5]) else { return nil }
                return ScalePoint(parameter: parameter, p50: p50, p99: p99, roundTripsPerSecond: rate,
                                  allocationsPerMessage: allocations, bytesPerMessage: bytes,
                                  referenceP50: parts.count == 8 ? Double(parts[6]) : nil,
                                  besideP50: parts.count == 8 ? Double(parts[7]) : nil)
            }
        }
        self.messages = messages
        allocationsPerMessage = allocations
        bytesPerMessage = bytes
        peakRSSBytes = peakRSS
    }
}

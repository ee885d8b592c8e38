import Foundation

/// `--svg PATH`: the pinned ratios of one run as a self-contained SVG bar chart, one panel
/// per workload, every peer's ratio to its workload's C baseline (= 1) on a log scale, with
/// the workload's bar drawn as a dashed line where the bar is a ratio.
///
/// It reads the `--json` shape (`JSONReport`), so the same code draws the chart at the end of
/// a run and from an earlier run's file (`--from-json PATH`). Hand-written SVG: no plotting
/// dependency, nothing fetched when the file is viewed.
enum Chart {
    /// The part of the `--json` document the chart needs.
    struct Input: Decodable {
        struct Machine: Decodable {
            var cpu: String
            var cores: Int
            var kernel: String
            var arch: String
        }
        struct Row: Decodable {
            var workload: String
            var peer: String
            var regime: String
            var p50_us: Double?
            var msgs_per_s: Double?
            var ratio_to_c: Double?
            var baseline: String
        }
        var machine: Machine
        var quick: Bool
        var results: [Row]
        var references: [Row]
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Decodes a `--json` document.
    static func input(json: Data) throws(Failure) -> Input {
        do {
            return try JSONDecoder().decode(Input.self, from: json)
        } catch {
            throw Failure(description: "not a Benchmarks --json document: \(error)")
        }
    }

    // ---- Layout ---------------------------------------------------------------------

    private static let width = 1020.0
    private static let labelWidth = 230.0
    private static let plotLeft = 240.0
    private static let plotRight = 920.0
    private static let rowHeight = 17.0
    private static let panelHeader = 24.0
    private static let panelGap = 18.0
    /// Workloads drawn, in this order (the scale rows and churn have no C baseline).
    private static let workloads: [Workload] = [.pingpong, .idle, .perform, .xprocess, .actorhop,
                                                .throughput, .fanin, .asyncstream, .xhost]

    /// The SVG document for `input`'s pinned rows.
    static func render(_ input: Input) -> String {
        let rows = (input.results + input.references).filter { $0.regime == Regime.pinned.rawValue }
        let panels: [(Workload, [Input.Row], Threshold?)] = workloads.compactMap { workload in
            let panelRows = order(rows.filter { $0.workload == workload.rawValue && $0.ratio_to_c != nil }, workload)
            return panelRows.isEmpty ? nil : (workload, panelRows, threshold(workload, rows))
        }
        var ratios: [Double] = [1]
        for (_, panelRows, threshold) in panels {
            ratios += panelRows.compactMap(\.ratio_to_c)
            if let threshold { ratios.append(threshold.ratio) }
        }
        let scale = LogScale(minimum: ratios.min()!, maximum: ratios.max()!, left: plotLeft, right: plotRight)

        let top = 78.0
        let panelsHeight = panels.reduce(0) { $0 + panelHeader + Double($1.1.count) * rowHeight + panelGap }
        let axisY = top + panelsHeight + 6
        let legendY = axisY + 40
        let height = legendY + 64
        var svg = [String]()
        svg.append("""
            <svg xmlns="http://www.w3.org/2000/svg" width="\(format(width))" height="\(format(height))" \
            viewBox="0 0 \(format(width)) \(format(height))" font-family="Helvetica, Arial, sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="20" y="28" font-size="18" font-weight="bold">RunLoopKit and its peers: ratio to the C baseline (= 1), pinned</text>
            <text x="20" y="48" fill="#444">\(escape(input.machine.cpu)), \(input.machine.cores) cores, \
            \(escape(input.machine.kernel))\(input.quick ? " — --quick run, smoke test only" : ""). \
            Latency: p50 ÷ C p50 (lower is better). Rate: msgs/s ÷ C msgs/s (higher is better).</text>
            <text x="20" y="66" fill="#444">Log scale. Dashed red line: the bar for RunLoopKit, \
            where it is a ratio. Hosts differ; ratios within one run hold.</text>
            """)
        if panels.isEmpty {
            svg.append("<text x=\"20\" y=\"\(format(top + 16))\">No pinned row with a C baseline in this run "
                       + "(--regime unpinned, or --filter without such a workload).</text>")
        }
        // Grid lines first, under the bars.
        for tick in scale.ticks {
            let x = scale.x(tick)
            svg.append(line(x, top - 4, x, axisY, stroke: tick == 1 ? "#000" : "#ddd",
                            width: tick == 1 ? 1.5 : 1))
        }
        var y = top
        for (workload, panelRows, threshold) in panels {
            let higherIsBetter = !workload.measuresLatency
            svg.append("""
                <text x="20" y="\(format(y + 16))" font-weight="bold">\(workload.rawValue)</text>\
                <text x="\(format(20 + 8.0 * Double(workload.rawValue.count) + 12))" y="\(format(y + 16))" fill="#555">\
                \(escape(caption(workload)))\(higherIsBetter ? " — higher is better" : " — lower is better")</text>
                """)
            y += panelHeader
            let panelTop = y
            for row in panelRows {
                guard let ratio = row.ratio_to_c, let peer = Peer(rawValue: row.peer) else { continue }
                let style = Style(peer, baseline: row.peer == row.baseline)
                let end = scale.x(ratio)
                let start = scale.x(scale.minimum)
                svg.append("""
                    <text x="\(format(labelWidth))" y="\(format(y + 12))" text-anchor="end"\
                    \(peer == .runLoopKit ? " font-weight=\"bold\"" : "")>\(escape(row.peer))</text>\
                    <rect x="\(format(start))" y="\(format(y + 2))" width="\(format(max(end - start, 1)))" \
                    height="\(format(rowHeight - 4))" fill="\(style.fill)"\(style.stroke)/>\
                    <text x="\(format(end + 4))" y="\(format(y + 12))" fill="#333"\(halo)>\(String(format: "%.2f×", ratio))</text>
                    """)
                y += rowHeight
            }
            if let threshold {
                let x = scale.x(threshold.ratio)
                svg.append(line(x, panelTop - 2, x, y + 2, stroke: "#c00", width: 1.5, dashed: true))
                svg.append("""
                    <text x="\(format(x + 3))" y="\(format(y + 11))" fill="#c00" font-size="10"\(halo)>\
                    \(escape(threshold.label))</text>
                    """)
            }
            y += panelGap
        }
        // The axis, with its tick labels.
        svg.append(line(plotLeft, axisY, plotRight, axisY, stroke: "#000", width: 1))
        for tick in scale.ticks {
            let x = scale.x(tick)
            svg.append(line(x, axisY, x, axisY + 5, stroke: "#000", width: 1))
            svg.append("<text x=\"\(format(x))\" y=\"\(format(axisY + 18))\" text-anchor=\"middle\">\(tickLabel(tick))</text>")
        }
        svg.append("""
            <text x="\(format((plotLeft + plotRight) / 2))" y="\(format(axisY + 34))" text-anchor="middle" fill="#444">\
            ratio to the workload's C baseline (log scale; 1 = C)</text>
            """)
        // The legend.
        let entries: [(String, Style)] = [
            ("RunLoopKit", Style(.runLoopKit, baseline: false)),
            ("C baseline (= 1); lighter: other C", Style(.cEventfd, baseline: true)),
            ("DispatchQueue", Style(.dispatch, baseline: false)),
            ("SwiftNIO", Style(.nio, baseline: false)),
            ("Foundation RunLoop", Style(.foundation, baseline: false)),
            ("default actor, AsyncStream", Style(.asyncStream, baseline: false)),
            ("reference rows (floors, not peers)", Style(.swiftRing, baseline: false)),
            ("RunLoopKit variants (batch, xnamed, distributed, async send)", Style(.runLoopKitNamed, baseline: false)),
        ]
        for (index, entry) in entries.enumerated() {
            let x = 20 + Double(index % 3) * 310
            let entryY = legendY + Double(index / 3) * 20
            svg.append("""
                <rect x="\(format(x))" y="\(format(entryY))" width="14" height="12" fill="\(entry.1.fill)"\(entry.1.stroke)/>\
                <text x="\(format(x + 20))" y="\(format(entryY + 10))">\(escape(entry.0))</text>
                """)
        }
        svg.append("</svg>")
        return svg.joined(separator: "\n") + "\n"
    }

    // ---- What is drawn --------------------------------------------------------------

    /// A workload's bar as a position on its panel's ratio axis, when the bar is a ratio.
    private struct Threshold {
        var ratio: Double
        var label: String
    }

    /// The bars, converted to the panel's ratio-to-C axis (see `Bar.evaluate`).
    private static func threshold(_ workload: Workload, _ rows: [Input.Row]) -> Threshold? {
        func row(_ workload: Workload, _ peer: Peer) -> Input.Row? {
            rows.first { $0.workload == workload.rawValue && $0.peer == peer.rawValue }
        }
        func baseline(_ workload: Workload) -> Input.Row? { row(workload, workload.baseline) }
        switch workload {
        case .pingpong, .perform:
            return Threshold(ratio: 1.15, label: "bar ≤ 1.15× C")
        case .idle:
            guard let floor = row(.idle, .runLoopKitOneSource)?.p50_us, let c = baseline(.idle)?.p50_us, c > 0 else { return nil }
            return Threshold(ratio: 1.1 * floor / c, label: "bar ≤ 1.1× one idle fd source")
        case .xprocess:
            guard let floor = row(.xprocess, .cSocketpairEpollCredentials)?.p50_us, let c = baseline(.xprocess)?.p50_us, c > 0 else {
                return nil
            }
            return Threshold(ratio: 1.15 * floor / c, label: "bar ≤ 1.15× C socketpair + epoll + credentials")
        case .throughput:
            guard let ring = row(.throughput, .swiftRing)?.ratio_to_c else { return nil }
            return Threshold(ratio: 0.75 * ring, label: "bar ≥ 0.75× Swift Data ring")
        case .fanin:
            guard let one = row(.throughput, .runLoopKit)?.msgs_per_s, let c = baseline(.fanin)?.msgs_per_s, c > 0 else { return nil }
            return Threshold(ratio: 0.9 * one / c, label: "bar ≥ 0.9× one-sender RunLoopKit")
        case .xhost:
            return Threshold(ratio: 1.4, label: "bar ≤ 1.4× grpc echo")
        default:
            return nil
        }
    }

    /// The catalogue's order, the baseline first.
    private static func order(_ rows: [Input.Row], _ workload: Workload) -> [Input.Row] {
        let peers = Catalogue.peers(for: workload)
        return rows.sorted { a, b in
            (peers.firstIndex { $0.rawValue == a.peer } ?? peers.count) < (peers.firstIndex { $0.rawValue == b.peer } ?? peers.count)
        }
    }

    private static func caption(_ workload: Workload) -> String {
        switch workload {
        case .pingpong: "round trip, 8-byte payload, two threads"
        case .idle: "ping-pong with \(IdleItems.Load.standard.summary) idle"
        case .perform: "one-way wake-up of a sleeping thread"
        case .xprocess: "round trip between two processes (×C socketpair)"
        case .actorhop: "await round trip to an actor on another thread"
        case .throughput: "64-byte messages, one sender, bound 1024"
        case .fanin: "64-byte messages, four senders, bound 1024"
        case .asyncstream: "64-byte messages to a for-await consumer"
        case .xhost: "round trip over the gRPC bridge on loopback (×grpc-swift echo)"
        default: workload.rawValue
        }
    }

    /// Colours by kind of peer: RunLoopKit stands out, C is grey, each Swift framework its own.
    private struct Style {
        var fill: String
        var stroke = ""

        init(_ peer: Peer, baseline: Bool) {
            switch peer {
            case .runLoopKit: fill = "#c4302b"
            case .runLoopKitNamed, .runLoopKitAsyncSend, .runLoopKitOneSource, .runLoopKitTenfold, .runLoopKitHealth,
                 .runLoopKitIntrospection, .runLoopKitMonitored, .runLoopKitTracing, .runLoopKitTraceContext,
                 .runLoopKitBatch, .runLoopKitDistributed, .runLoopKitDistributedPinned, .runLoopKitSealedMemory,
                 .runLoopKitInlineBisection: fill = "#e8908c"
            case .cEventfd, .cSocketpair, .cSdEvent, .cSdBus, .cSdBusBroker, .grpcEcho, .cMemfd, .cStreamCopy:
                fill = baseline ? "#555555" : "#999999"
            case .dispatch: fill = "#e69f00"
            case .nio: fill = "#009e73"
            case .foundation: fill = "#7b5aa6"
            case .defaultActor, .asyncStream: fill = "#56b4e9"
            case .swiftRing, .componentRing, .cSocketpairEpoll, .cSocketpairEpollCredentials, .cSocketpairEpollPidfd,
                 .cFutex, .cEventfdEpoll, .grpcEchoDefaults:
                fill = "#ffffff"
                stroke = " stroke=\"#555\" stroke-dasharray=\"3 2\""
            }
        }
    }

    // ---- SVG helpers ----------------------------------------------------------------

    /// Log-scale positions between powers of ten around the data.
    private struct LogScale {
        var minimum: Double
        var maximum: Double
        var left: Double
        var right: Double

        init(minimum: Double, maximum: Double, left: Double, right: Double) {
            // Whole 1-3-10 steps around the data, so the ticks bracket every bar.
            self.minimum = Self.stepBelow(min(minimum, 1))
            self.maximum = Self.stepAbove(max(maximum, 1) * 1.25)
            self.left = left
            self.right = right
        }

        func x(_ value: Double) -> Double {
            let clamped = Swift.min(Swift.max(value, minimum), maximum)
            return left + (log10(clamped) - log10(minimum)) / (log10(maximum) - log10(minimum)) * (right - left)
        }

        var ticks: [Double] {
            var ticks: [Double] = []
            var decade = pow(10, floor(log10(minimum)))
            while decade <= maximum {
                for step in [1.0, 3.0] where decade * step >= minimum * 0.999 && decade * step <= maximum * 1.001 {
                    ticks.append(decade * step)
                }
                decade *= 10
            }
            return ticks
        }

        private static func stepBelow(_ value: Double) -> Double {
            let decade = pow(10, floor(log10(value)))
            return value >= 3 * decade ? 3 * decade : decade
        }

        private static func stepAbove(_ value: Double) -> Double {
            let decade = pow(10, floor(log10(value)))
            return value <= 3 * decade ? 3 * decade : 10 * decade
        }
    }

    /// A white outline behind a label, so a line crossing it does not cross its glyphs.
    private static let halo = " stroke=\"#fff\" stroke-width=\"3\" paint-order=\"stroke\""

    private static func tickLabel(_ value: Double) -> String {
        value >= 1 ? String(format: "%.0f×", value) : String(format: "%g×", value)
    }

    private static func line(_ x1: Double, _ y1: Double, _ x2: Double, _ y2: Double,
                             stroke: String, width: Double, dashed: Bool = false) -> String {
        "<line x1=\"\(format(x1))\" y1=\"\(format(y1))\" x2=\"\(format(x2))\" y2=\"\(format(y2))\" "
            + "stroke=\"\(stroke)\" stroke-width=\"\(format(width))\"\(dashed ? " stroke-dasharray=\"5 3\"" : "")/>"
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    private static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}

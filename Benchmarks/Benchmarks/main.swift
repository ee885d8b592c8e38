import Foundation

/// `swift run -c release Benchmarks`: measures what a message handoff between two
/// threads costs with RunLoopKit and with the peers a daemon author would otherwise
/// use, side by side in one run (Benchmarks/README.md). Each case runs in its own child process
/// (`ChildProcess`); this parent collects the rows, prints the table and the bars, and
/// writes `--json` and `--svg` (or, with `--from-json`, only draws the chart of an earlier run).

let options: Options
do {
    options = try Options.parse(Array(CommandLine.arguments.dropFirst()))
} catch {
    FileHandle.standardError.write(Data("\(error)\n".utf8))
    exit(2)
}
if let source = options.fromJSONPath, let svgPath = options.svgPath {
    do {
        let json = try Data(contentsOf: URL(fileURLWithPath: source))
        try Chart.render(Chart.input(json: json)).write(toFile: svgPath, atomically: true, encoding: .utf8)
    } catch {
        fail("--from-json \(source) --svg \(svgPath): \(error)")
    }
    exit(0)
}
if let echo = options.crossProcessEcho {
    RunLoopKitPeer.serveCrossProcessEcho(echo)  // the xprocess responder: nothing else runs
}
if let echo = options.largeDataEcho {
    LargeData.serveEcho(echo)  // the xlarge responder: nothing else runs
}
if let echo = options.distributedEcho {
    DistributedCalls.serve(echo)  // the distributed-call responder: nothing else runs
}
let plans = Plans(options: options)
if let size = options.churnInstructionsSize {
    Churn.countInstructions(size: size, plan: plans.churn)  // under callgrind: nothing else runs
    exit(0)
}

if let benchmarkCase = options.childCase {
    ChildProcess.serve(benchmarkCase, plans: plans)
    exit(0)
}

#if DEBUG
// `swift run Benchmarks` builds for debugging: unoptimised code with runtime checks measures
// nothing a user of the library would see.
let debugBuildNotice = """
    NOTE: this is a debug build, so its figures are not meaningful (unoptimised code, runtime checks).
    For real figures run the release build: swift run -c release Benchmarks

    """
FileHandle.standardOutput.write(Data(debugBuildNotice.utf8))
#endif

let machine = Machine.current()
func run(_ benchmarkCase: BenchmarkCase, _ label: String = "") -> CaseResult {
    FileHandle.standardError.write(Data("  running \(benchmarkCase)\(label)\n".utf8))
    return ChildProcess.run(benchmarkCase, options: options, timeout: plans.caseTimeout(for: benchmarkCase))
}
var results: [CaseResult] = []
for regime in options.regimes {
    for workload in options.workloads {
        for peer in Catalogue.peers(for: workload) where options.runs(peer, in: workload) {
            results.append(run(BenchmarkCase(workload: workload, peer: peer, regime: regime)))
        }
    }
}
// The second run of the cases that run twice, after every first run: far apart in time.
for index in results.indices where results[index].benchmarkCase.runsTwice {
    let again = run(results[index].benchmarkCase, " (second run)")
    if again.isFaster(than: results[index]) { results[index] = again }
}

let report = Report(machine: machine, quick: options.quick, results: results)
let bars = Bar.evaluate(report)
print("")
#if DEBUG
print(debugBuildNotice)
#endif
print(Table.render(report))
for note in options.workloads.flatMap(Catalogue.notes) { print("NOTE: \(note)") }
print("\nBars (Benchmarks/README.md, pinned regime, same run):")
for bar in bars { print(bar.line) }

let json = JSONReport.render(report, bars: bars)
if let path = options.jsonPath {
    do {
        try json.write(toFile: path, atomically: true, encoding: .utf8)
    } catch {
        fail("cannot write \(path): \(error)")
    }
}
if let path = options.svgPath {
    // Drawn from the JSON just written, as `--from-json` draws it: one path to the chart.
    do {
        try Chart.render(Chart.input(json: Data(json.utf8))).write(toFile: path, atomically: true, encoding: .utf8)
    } catch {
        fail("cannot write \(path): \(error)")
    }
}

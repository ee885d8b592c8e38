import Foundation

/// Command-line options, parsed by hand (the package takes no argument-parser
/// dependency for one executable).
struct Options: Sendable {
    var quick = false
    /// The workloads to run: by default every one this build can run (see `Workload.isAvailable`).
    var workloads = Workload.allCases.filter(\.isAvailable)
    /// The peers asked for; each workload's baseline runs as well (see `runs(_:in:)`).
    var peers = Peer.allCases
    var regimes = Regime.allCases
    var jsonPath: String?
    /// Where to write the SVG chart of the pinned ratios.
    var svgPath: String?
    /// Draw the chart from this `--json` file instead of running anything.
    var fromJSONPath: String?
    /// Overrides the length of the long throughput stream.
    var streamMessages: Int?
    /// Set in a child process: the one case it runs (see `ChildProcess`).
    var childCase: BenchmarkCase?
    /// Set in the responder process of RunLoopKit's `xprocess` case (hidden, like
    /// `--run-case`): it only echoes (see `RunLoopKitPeer.serveCrossProcessEcho`).
    var crossProcessEcho: CrossProcessEcho?
    /// Set in the responder process of RunLoopKit's `xlarge` rows (hidden): it only acknowledges
    /// (see `LargeData.serveEcho`).
    var largeDataEcho: LargeDataEcho?
    /// Set in the responder process of the distributed-call row (hidden): it only publishes
    /// its actor (see `DistributedCalls.serve`).
    var distributedEcho: DistributedEcho?
    /// Set in the process the churn case runs under callgrind (hidden, like `--run-case`): the
    /// number of items of the one window it counts (see `Churn.countInstructions`).
    var churnInstructionsSize: Int?

    /// `--xprocess-echo SEND_RIGHT CELL` (descriptors the responder inherited), or
    /// `--xprocess-echo-named NAME CELL` (the initiator's port is published as NAME).
    struct CrossProcessEcho: Sendable {
        enum Initiator: Sendable {
            /// A send right to the initiator's port.
            case sendRight(Int32)
            /// The name the initiator's port is published under.
            case name(String)
        }
        var initiator: Initiator
        /// The memfd of the `bench_responder_cell` shared with the initiator.
        var cellDescriptor: Int32
        /// `--xprocess-echo-bytes N` after either form: the `xpayloads` row's block size
        /// (pings carry one block and their sequence number as the msgid).
        var payloadBytes: Int?
    }

    /// `--xlarge-echo SEND_RIGHT CELL`: descriptors the xlarge responder inherited.
    struct LargeDataEcho: Sendable {
        /// A send right to the initiator's port.
        var sendRight: Int32
        /// The memfd of the `bench_responder_cell` shared with the initiator.
        var cellDescriptor: Int32
    }

    /// `--distributed-echo NAME CELL`: publish the benchmark's distributed actor as NAME.
    struct DistributedEcho: Sendable {
        var name: String
        /// The memfd of the `bench_responder_cell` shared with the initiator.
        var cellDescriptor: Int32
        /// `--distributed-echo-pinned`: the actor is pinned to a resident thread.
        var pinned = false
    }

    static let usage = """
        usage: Benchmarks [--quick] [--filter WORKLOADS] [--peers PEERS] [--regime REGIME]
                          [--messages N] [--json PATH] [--svg PATH]
               Benchmarks --from-json PATH --svg PATH

          --quick            short runs (under 30 s in all) for a smoke test
          --filter W1,W2     only these workloads: \(Workload.allCases.map(\.rawValue).joined(separator: ", "))
          --peers P1,P2      only these peers (case-insensitive): \(Peer.allCases.map(\.rawValue).joined(separator: ", "))
                             (each workload's baseline is always kept: C eventfd, and
                             C socketpair for xprocess)
          --regime R         pinned, unpinned or both (default both)
          --messages N       length of the long throughput stream (default 10000000; 300000 with --quick)
          --json PATH        also write the results as JSON to PATH
          --svg PATH         also draw the pinned ratios (every peer, per workload, C = 1)
                             as an SVG chart to PATH
          --from-json PATH   run nothing: draw the --svg chart from an earlier run's --json
        """

    struct UsageError: Error, CustomStringConvertible {
        var description: String
    }

    static func parse(_ arguments: [String]) throws(UsageError) -> Options {
        var options = Options()
        var rest = arguments[...]
        func value(for flag: String) throws(UsageError) -> String {
            guard let value = rest.popFirst() else { throw UsageError(description: "\(flag) needs a value") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--quick":
                options.quick = true
            case "--filter":
                options.workloads = try list(try value(for: argument), flag: argument) { Workload(rawValue: $0) }
                if let missing = options.workloads.first(where: { !$0.isAvailable }) {
                    throw UsageError(description: "--filter: \(missing.rawValue) needs the GRPC trait: "
                                     + "swift run -c release --enable-all-traits Benchmarks")
                }
            case "--peers":
                let peers = try list(try value(for: argument), flag: argument) { name in
                    Peer.allCases.first { $0.rawValue.lowercased() == name.lowercased() }
                }
                options.peers = Peer.allCases.filter { peers.contains($0) }
            case "--regime":
                let regime = try value(for: argument)
                options.regimes = regime == "both"
                    ? Regime.allCases
                    : try list(regime, flag: argument) { Regime(rawValue: $0) }
            case "--messages":
                guard let count = Int(try value(for: argument)), count > 0 else {
                    throw UsageError(description: "--messages needs a positive count")
                }
                options.streamMessages = count
            case "--json":
                options.jsonPath = try value(for: argument)
            case "--svg":
                options.svgPath = try value(for: argument)
            case "--from-json":
                options.fromJSONPath = try value(for: argument)
            case "--run-case":
                let text = try value(for: argument)
                guard let benchmarkCase = BenchmarkCase(text) else {
                    throw UsageError(description: "--run-case: not a case: \(text)")
                }
                options.childCase = benchmarkCase
            case "--xprocess-echo":
                guard let sendRight = Int32(try value(for: argument)), let cell = Int32(try value(for: argument)),
                      sendRight >= 0, cell >= 0 else {
                    throw UsageError(description: "--xprocess-echo needs two descriptors")
                }
                options.crossProcessEcho = CrossProcessEcho(initiator: .sendRight(sendRight), cellDescriptor: cell)
            case "--xlarge-echo":
                guard let sendRight = Int32(try value(for: argument)), let cell = Int32(try value(for: argument)),
                      sendRight >= 0, cell >= 0 else {
                    throw UsageError(description: "--xlarge-echo needs two descriptors")
                }
                options.largeDataEcho = LargeDataEcho(sendRight: sendRight, cellDescriptor: cell)
            case "--xprocess-echo-named":
                let name = try value(for: argument)
                guard let cell = Int32(try value(for: argument)), cell >= 0 else {
                    throw UsageError(description: "--xprocess-echo-named needs a name and a descriptor")
                }
                options.crossProcessEcho = CrossProcessEcho(initiator: .name(name), cellDescriptor: cell)
            case "--distributed-echo", "--distributed-echo-pinned":
                let name = try value(for: argument)
                guard let cell = Int32(try value(for: argument)), cell >= 0 else {
                    throw UsageError(description: "\(argument) needs a name and a descriptor")
                }
                options.distributedEcho = DistributedEcho(name: name, cellDescriptor: cell,
                                                          pinned: argument == "--distributed-echo-pinned")
            case "--xprocess-echo-bytes":
                guard let bytes = Int(try value(for: argument)), bytes > 0, options.crossProcessEcho != nil else {
                    throw UsageError(description: "--xprocess-echo-bytes needs a size, after --xprocess-echo")
                }
                options.crossProcessEcho?.payloadBytes = bytes
            case "--churn-instructions":
                guard let size = Int(try value(for: argument)), size > 0 else {
                    throw UsageError(description: "--churn-instructions needs a number of items")
                }
                options.churnInstructionsSize = size
            case "--help", "-h":
                throw UsageError(description: usage)
            default:
                throw UsageError(description: "unknown argument \(argument)\n\(usage)")
            }
        }
        if options.fromJSONPath != nil && options.svgPath == nil {
            throw UsageError(description: "--from-json draws a chart: it needs --svg PATH")
        }
        return options
    }

    /// Parses a comma-separated list, rejecting unknown names so a typo never
    /// silently runs nothing.
    private static func list<T>(_ text: String, flag: String,
                                _ make: (String) -> T?) throws(UsageError) -> [T] {
        var items: [T] = []
        for name in text.split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces) }) {
            guard let item = make(name) else { throw UsageError(description: "\(flag): unknown name \(name)") }
            items.append(item)
        }
        return items
    }

    /// Whether `peer` runs in `workload`: asked for, or the workload's baseline (every
    /// ratio needs it).
    func runs(_ peer: Peer, in workload: Workload) -> Bool {
        peer == workload.baseline || peers.contains(peer)
    }

    /// The arguments that make a child process run `benchmarkCase` with these options.
    func childArguments(for benchmarkCase: BenchmarkCase) -> [String] {
        var arguments = ["--run-case", benchmarkCase.description]
        if quick { arguments.append("--quick") }
        if let streamMessages { arguments += ["--messages", String(streamMessages)] }
        return arguments
    }
}

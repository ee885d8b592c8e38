// runloopctl: see inside a process built on RunLoopKit (DESIGN §2h, Protocols/introspection.md).
import Foundation
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

struct Failure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

let usage = """
    runloopctl — see inside a process built on RunLoopKit

    Usage:
      runloopctl list [--all-users]                 names published on this host, with their publishers
      runloopctl status PID|NAME                    each loop: state, callout, modes, ports, timers
      runloopctl monitor PID|NAME [--bytes N]       a line per message the process's ports send or deliver
      runloopctl call NAME MSGID [--text S | --hex H | --file F] [--timeout D]
                                                    send a request to a published name, print the reply
      runloopctl trace PID|NAME [--duration D] -o FILE
                                                    a Perfetto trace of D (default 5s), for ui.perfetto.dev

    Options:
      --json     machine-readable output (JSON; JSON Lines for monitor)
      --help     this text

    status, monitor and trace need the process to have introspection on (Introspection.enable()
    or RUNLOOPKIT_INTROSPECTION=1) and to run as this user (or this user to be root).
    Durations: 5, 5s, 500ms, 2m.

    """

/// Parsed command-line: the command, its positional arguments and its options.
struct Arguments {
    var command: String
    var positional: [String] = []
    var options: [String: String] = [:]
    var flags: Set<String> = []

    static let valued: Set<String> = ["--bytes", "--text", "--hex", "--file", "--timeout", "--duration", "-o", "--output"]
    static let known: Set<String> = ["--json", "--all-users", "--help", "-h"]

    init(_ arguments: [String]) throws {
        var rest = arguments[...]
        var command: String?
        while let argument = rest.popFirst() {
            if Self.valued.contains(argument) {
                guard let value = rest.popFirst() else { throw Failure("\(argument) needs a value") }
                options[argument == "--output" ? "-o" : argument] = value
            } else if Self.known.contains(argument) {
                flags.insert(argument == "-h" ? "--help" : argument)
            } else if argument.hasPrefix("-") && argument.count > 1 && Int(argument) == nil {
                throw Failure("unknown option \(argument) (see runloopctl --help)")
            } else if command == nil {
                command = argument
            } else {
                positional.append(argument)
            }
        }
        self.command = command ?? ""
    }

    var json: Bool { flags.contains("--json") }

    func positional(_ index: Int, _ what: String) throws -> String {
        guard positional.count > index else { throw Failure("\(command): missing \(what) (see runloopctl --help)") }
        return positional[index]
    }

    func expectAtMost(_ count: Int) throws {
        if positional.count > count { throw Failure("\(command): unexpected argument '\(positional[count])'") }
    }
}

func parseDuration(_ text: String) throws -> Duration {
    let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        if let value = Double(text.dropLast(suffix.count)), value >= 0 { return .milliseconds(Int64(value * scale * 1000)) }
    }
    if let value = Double(text), value >= 0 { return .milliseconds(Int64(value * 1000)) }
    throw Failure("'\(text)' is not a duration (e.g. 5, 5s, 500ms, 2m)")
}

/// PID, or the publisher of NAME.
func resolveProcess(_ target: String) throws -> Int32 {
    if let pid = Int32(target), pid > 0 { return pid }
    return try Names.publisher(of: target)
}

func printJSON(_ value: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Left-aligned columns.
func table(_ header: [String], _ rows: [[String]]) {
    var widths = header.map(\.count)
    for row in rows { for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) } }
    for row in [header] + rows {
        let cells = row.enumerated().map { index, cell in
            index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
        }
        say(cells.joined(separator: "  "))
    }
}

func run(_ arguments: Arguments) throws {
    switch arguments.command {
    case "list": try List.run(arguments)
    case "status": try Status.run(arguments)
    case "call": try Call.run(arguments)
    case "monitor": try Monitor.run(arguments)
    case "trace": try TraceCommand.run(arguments)
    case "": throw Failure("no command (see runloopctl --help)")
    default: throw Failure("unknown command '\(arguments.command)' (see runloopctl --help)")
    }
}

do {
    let arguments = try Arguments(Array(CommandLine.arguments.dropFirst()))
    if arguments.flags.contains("--help") || arguments.command == "help" {
        FileHandle.standardOutput.write(Data(usage.utf8))
        exit(0)
    }
    try run(arguments)
    exit(0)
} catch {
    FileHandle.standardError.write(Data("runloopctl: \(error)\n".utf8))
    exit(1)
}

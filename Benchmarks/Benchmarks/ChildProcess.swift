import Foundation
import Synchronization

/// Runs each case in a fresh child process (this executable with `--run-case`).
///
/// A process per case means each row starts from the same clean state — no thread
/// pool, event loop or heap left warm or fragmented by the peer before it — that
/// `ru_maxrss` is the peak of that one case, and that a regime's CPU mask can be set
/// on the main thread before any thread exists (see `Pinning`).
enum ChildProcess {
    static func run(_ benchmarkCase: BenchmarkCase, options: Options, timeout: Duration) -> CaseResult {
        let process = Process()
        process.executableURL = executable
        process.arguments = options.childArguments(for: benchmarkCase)
        let output = Pipe()
        process.standardOutput = output
        do { try process.run() } catch { fail("cannot start \(benchmarkCase): \(error)") }

        let timedOut = Atomic<Bool>(false)
        let watchdog = DispatchWorkItem { [process] in
            timedOut.store(true, ordering: .relaxed)
            process.terminate()
        }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout.timeInterval, execute: watchdog)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        watchdog.cancel()

        if timedOut.load(ordering: .relaxed) { fail("\(benchmarkCase) did not finish within \(timeout)") }
        guard process.terminationReason == .exit, process.terminationStatus == 0 else {
            fail("\(benchmarkCase) exited with status \(process.terminationStatus) (\(process.terminationReason))")
        }
        let lines = text.split(separator: "\n").map(String.init)
        guard let result = lines.lazy.compactMap({ CaseResult(line: $0, for: benchmarkCase) }).first else {
            fail("\(benchmarkCase) printed no result:\n\(text)")
        }
        return result
    }

    /// This executable, resolved once so the children run the same binary.
    private static let executable: URL = {
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments[0]
        return URL(fileURLWithPath: path)
    }()

    /// The child side: pins, runs the case, prints its result line.
    static func serve(_ benchmarkCase: BenchmarkCase, plans: Plans) {
        Pinning.apply(benchmarkCase.regime)
        let result = Catalogue.run(benchmarkCase, plans: plans)
        print(result.line)
    }
}

extension Duration {
    var timeInterval: TimeInterval {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

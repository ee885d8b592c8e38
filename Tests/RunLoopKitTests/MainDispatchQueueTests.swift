// Guarantees §3.20: the main loop serves the main dispatch queue (and with it @MainActor). The test
// runner owns this process's main thread, so each scenario runs in `LoopHost`, a program whose
// main thread runs ThreadRunLoop.main; the test checks the lines it prints.

import Glibc
import PackageTestSupport
import Testing

/// LoopHost, built beside this test binary (a dependency of the test target).
private let loopHost = executableBesideTests("LoopHost")

/// Runs a LoopHost scenario; its stdout lines, or nil (recorded as an issue) if it failed.
private func hostLines(_ scenario: String) -> [String]? {
    guard let outcome = runChild(loopHost, [scenario], timeout: .seconds(60)) else {
        Issue.record("could not start \(loopHost)")
        return nil
    }
    guard outcome.exitCode == 0 else {
        Issue.record("LoopHost \(scenario): exit \(String(describing: outcome.exitCode)), signal \(String(describing: outcome.signal)); output:\n\(outcome.output)")
        return nil
    }
    return outcome.output.split(separator: "\n").map(String.init)
}

@Suite("§3.20 the main dispatch queue", .serialized)
struct MainDispatchQueueTests {

    @Test("§3.20 a block posted to DispatchQueue.main from another thread wakes the sleeping main loop, runs on the main thread, and counts as a handled source")
    func dispatchMainWakesTheMainLoop() throws {
        let lines = try #require(hostLines("dispatch-wakes"))
        #expect(lines == [
            "posted while the main loop slept: true",
            "block on main thread: true",
            "result: handledSource",
            "block ran: true",
        ])
    }

    @Test("§3.20 Task { @MainActor in }, await MainActor.run and DispatchQueue.main all run while the main thread runs ThreadRunLoop.main")
    func mainActorWorksOnTheMainLoop() throws {
        let lines = try #require(hostLines("main-actor"))
        #expect(Set(lines) == [
            "Task @MainActor on main thread: true",
            "MainActor.run on main thread: true",
            "DispatchQueue.main on main thread: true",
            "run returned before the hang guard: true",
        ])
        #expect(lines.last == "run returned before the hang guard: true")
    }

    @Test("the README's example runs on a main thread: the worker's reply arrives on the main loop, then a perform with waitUntilDone")
    func readmeExampleRuns() throws {
        let lines = try #require(hostLines("readme"))
        #expect(lines == ["reply: HELLO", "ran on the worker"])
    }

    @Test("§3.20 non-common modes and other threads' loops never drain the main queue; a common mode does, also one made common later")
    func onlyCommonModesOfTheMainLoopDrain() throws {
        let lines = try #require(hostLines("modes"))
        #expect(lines == [
            "private mode result: timedOut",
            "ran in a private mode or on another loop: false",
            "default mode result: handledSource",
            "ran in the default mode: true",
            "mode made common result: handledSource",
            "ran in the mode made common: true",
        ])
    }

    @Test("the main loop made at startup serves the main queue on its first run even when every descriptor was taken meanwhile (no trap in libdispatch)")
    func mainLoopRunsWithNoDescriptorsLeft() throws {
        let lines = try #require(hostLines("no-descriptors"))
        #expect(lines == [
            "descriptors exhausted: true",
            "block on main thread: true",
            "run returned before the hang guard: true",
        ])
    }
}

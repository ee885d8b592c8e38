// The chaos soak (Tests/PortPeer/Soak.swift), run in a child process so that its descriptor
// and memory accounting sees nothing of the tests running beside it. A few seconds by
// default; `RUNLOOPKIT_SOAK_SECONDS` makes it longer (CI runs it alone for 90 s).

#if canImport(Glibc)
import Glibc
#endif
import Testing

@Suite("Chaos soak")
struct ChaosSoakTests {

    @Test("ports, resident threads, timers, observers and SIGKILLed child processes at once: every message delivered once in order, refused with a typed error, or counted as discarded; no descriptor leaked; memory flat")
    func chaosSoak() async throws {
        let seconds = getenv("RUNLOOPKIT_SOAK_SECONDS").flatMap { Int(String(cString: $0)) } ?? 5
        let child = try ChildProcess(portPeer, ["soak", String(seconds)])
        // The soak's own watchdog names a stuck thread; this deadline only guards against a
        // child that hangs before its watchdog starts.
        let exit = await offThePool { child.finish(timeout: .seconds(seconds) + .seconds(180)) }
        #expect(exit == .exited(0), "PortPeer soak: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("soak ok: "), "\(child.output)")
    }
}

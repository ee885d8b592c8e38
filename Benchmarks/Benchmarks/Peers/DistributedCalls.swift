import CBenchmarkPeers
import Distributed
import Foundation
import RunLoopKit
import RunLoopKitDistributed

/// The `xprocess` workload's distributed-call row (the "distributed call" bar of Benchmarks/README.md): a task of this
/// process calls `echo(_:)` — one `Int` argument, one `Int` result — on a distributed actor that
/// a responder process (this executable with `--distributed-echo`) publishes through a
/// `PortActorSystem`, and checks the result. One sample is the call and its reply, two one-way
/// messages as in every other round trip. Read against the xnamed row: the same kind of
/// socket, plus the envelope, the JSON texts, and a hop on each side between the system's
/// loop thread and the task (the callee is a default actor, on the cooperative pool).
///
/// The responder records each call it answered, and the CPU it ran on, in a
/// `bench_responder_cell` both processes map, as the other cross-process responders do; the
/// allocation columns count this process only (the caller's side of each call).
enum DistributedCalls {
    /// How long the initiator waits for the responder to publish the actor.
    private static let publishTimeout = Duration.seconds(10)

    /// The initiator: spawns the responder, calls until `plan` is complete, checks that the
    /// responder answered every call, then ends it (SIGTERM) and reaps it. `pinned`: the
    /// responder's actor is pinned to a resident thread, whose loop then also reads its calls
    /// (no hand-off between threads in the callee).
    static func measure(_ plan: LatencyPlan, pinned: Bool = false) -> LatencyMeasurement {
        var cellDescriptor: Int32 = -1
        guard let mapped = bench_responder_cell_create(&cellDescriptor) else {
            fail("RunLoopKit distributed: cannot create the shared responder cell (memfd)")
        }
        let cell = SharedCell(pointer: mapped)
        let name = "rlk-bench-distributed-\(getpid())"
        // Spawned after `Pinning.apply`: in the pinned regime it inherits the one-CPU mask.
        let pid = RunLoopKitPeer.spawnResponder([pinned ? "--distributed-echo-pinned" : "--distributed-echo", name,
                                                 String(cellDescriptor)])
        close(cellDescriptor)

        let system = PortActorSystem()
        // The two actors are distinct types (a call names its target by the function's mangled
        // name, which names the type): the calls are made through closures of either.
        let call: @Sendable (Int) async throws -> Int
        let ready: @Sendable () async throws -> Void
        do {
            if pinned {
                let echo = try PinnedBenchEcho.resolve(id: .named(name), using: system)
                call = { try await echo.echo($0) }
                ready = { try await echo.ready() }
            } else {
                let echo = try BenchEcho.resolve(id: .named(name), using: system)
                call = { try await echo.echo($0) }
                ready = { try await echo.ready() }
            }
        } catch {
            fail("RunLoopKit distributed: resolve \(name): \(error)")
        }
        let (measurement, calls) = BlockingTask.run { () async -> (LatencyMeasurement, UInt64) in
            await waitUntilPublished(ready, name: name)
            var recorder = LatencyRecorder(plan: plan, messagesPerSample: 2)
            var seq = 0
            repeat {
                seq += 1
                let calledAt = bench_now_ns()
                let reply: Int
                do { reply = try await call(seq) } catch { fail("RunLoopKit distributed: call \(seq) threw \(error)") }
                let now = bench_now_ns()
                guard reply == seq else { fail("RunLoopKit distributed: call \(seq) returned \(reply)") }
                let same = bench_current_cpu() == bench_responder_cell_cpu(cell.pointer)
                if !recorder.add(now &- calledAt, sameCPU: same, now: now) { break }
            } while true
            return (recorder.measurement, UInt64(seq))
        }
        let answered = bench_responder_cell_answered(cell.pointer)
        guard answered == calls else { fail("RunLoopKit distributed: the responder answered \(answered) calls, the task made \(calls)") }
        system.shutdown()
        kill(pid, SIGTERM)
        let status = RunLoopKitPeer.waitForExit(pid)
        guard status == 128 + SIGTERM else { fail("RunLoopKit distributed: the responder exited with status \(status)") }
        bench_responder_cell_unmap(cell.pointer)
        return measurement
    }

    /// Calls `ready()` until the responder has published the actor (until then a call finds no
    /// actor by that name), or fails after `publishTimeout`.
    private static func waitUntilPublished(_ ready: @Sendable () async throws -> Void, name: String) async {
        let deadline = ContinuousClock.now + publishTimeout
        while true {
            do {
                try await ready()
                return
            } catch PortActorSystemError.actorNotFound(_) where ContinuousClock.now < deadline {
                try? await Task.sleep(for: .milliseconds(1))
            } catch {
                fail("RunLoopKit distributed: the responder did not publish \(name): \(error)")
            }
        }
    }

    /// The responder process (`--distributed-echo NAME CELL`): publishes a `BenchEcho` as NAME
    /// and serves it from the system's threads until the initiator ends it. Runs nothing else.
    static func serve(_ echo: Options.DistributedEcho) -> Never {
        guard let mapped = bench_responder_cell_map(echo.cellDescriptor) else {
            fail("RunLoopKit distributed responder: cannot map the shared responder cell")
        }
        close(echo.cellDescriptor)
        let system = PortActorSystem()
        do {
            let cell = SharedCell(pointer: mapped)
            if echo.pinned {
                try system.publish(PinnedBenchEcho(actorSystem: system, cell: cell), as: echo.name)
            } else {
                try system.publish(BenchEcho(actorSystem: system, cell: cell), as: echo.name)
            }
        } catch {
            fail("RunLoopKit distributed responder: publish(_:as: \(echo.name)): \(error)")
        }
        while true { pause() }
    }
}

/// The responder's actor: a default actor, as most published actors are.
distributed actor BenchEcho {
    typealias ActorSystem = PortActorSystem
    private let cell: SharedCell
    private var answered = 0

    init(actorSystem: PortActorSystem, cell: SharedCell) {
        self.actorSystem = actorSystem
        self.cell = cell
    }

    /// Answers once the actor is published: the initiator's first call.
    distributed func ready() {}

    /// Checks that `value` is the next call's number, records it and where it ran, returns it.
    distributed func echo(_ value: Int) -> Int {
        guard value == answered + 1 else {
            fail("RunLoopKit distributed responder: received call \(value), expected \(answered + 1)")
        }
        answered = value
        bench_responder_cell_answer(cell.pointer, UInt64(value))
        return value
    }
}

/// The same actor pinned to a resident thread, for the pinned-actor row: its calls
/// are read and run on that thread.
distributed actor PinnedBenchEcho {
    typealias ActorSystem = PortActorSystem
    static let thread = ResidentThread(name: "bench-echo")
    private let cell: SharedCell
    private var answered = 0

    init(actorSystem: PortActorSystem, cell: SharedCell) {
        self.actorSystem = actorSystem
        self.cell = cell
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor {
        Self.thread.executor.asUnownedSerialExecutor()
    }

    distributed func ready() {}

    distributed func echo(_ value: Int) -> Int {
        guard value == answered + 1 else {
            fail("RunLoopKit distributed responder (pinned): received call \(value), expected \(answered + 1)")
        }
        answered = value
        bench_responder_cell_answer(cell.pointer, UInt64(value))
        return value
    }
}

/// The cell both processes map. `@unchecked Sendable`: its fields are only stored and loaded
/// atomically (`bench_responder_cell_answer` and the loads beside it).
struct SharedCell: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<bench_responder_cell>
}

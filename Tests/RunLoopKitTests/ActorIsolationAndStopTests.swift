// Guarantees §3.58 (an actor on a loop keeps its isolation while one of its methods runs that
// loop) and §3.59 (ResidentThread.stop() runs the executor's queued and in-flight jobs first).

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing

/// The stress sizes: a sanitizer finds a race in a few thousand messages as well as in many.
private let underSanitizer = environment("RUNLOOPKIT_SANITIZER") != nil

/// An actor pinned to a resident thread whose method can run the thread's loop inside itself.
private actor Pinned {
    let thread: ResidentThread
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    var items: [Int] = []
    /// Calls that began while another was inside a nested run of the loop.
    var interleaved = 0
    private var insideNestedRun = false

    init(thread: ResidentThread) {
        self.thread = thread
    }

    /// Appends to `items` through an `inout` access held across a nested run of the loop, as
    /// the exclusivity trap did.
    func appendAcrossNestedRun(_ value: Int, run: @Sendable () -> Void) {
        insideNestedRun = true
        modify(&items) { items in
            run()
            items.append(value)
        }
        insideNestedRun = false
    }

    func touch(_ value: Int) {
        if insideNestedRun { interleaved += 1 }
        items.append(value)
    }

    private func modify(_ items: inout [Int], _ body: (inout [Int]) -> Void) { body(&items) }
}

/// A port on a resident thread that answers each request after a while, so that a caller's
/// nested run lasts.
private func slowServer() throws -> (ResidentThread, MessagePort) {
    let server = ResidentThread(name: uniqueThreadName("iso-srv"))
    let service = try MessagePort()
    service.setHandler { request in
        block(for: .milliseconds(200))
        try? request.replyPort?.send(msgid: request.msgid, timeout: .seconds(5))
    }
    server.runLoop.add(service, forMode: .default)
    return (server, service)
}

@Suite("§3.58 actor isolation across nested runs")
struct ActorIsolationTests {

    /// Runs `nestedRun` inside an actor method while other calls of the same actor are queued;
    /// returns how many of them ran inside it, and the final order.
    private func callsInsideNestedRun(_ nestedRun: @escaping @Sendable (ResidentThread) -> Void) async throws -> (interleaved: Int, items: [Int]) {
        let thread = ResidentThread(name: uniqueThreadName("iso"))
        defer { thread.stop() }
        let actor = Pinned(thread: thread)
        let entered = Flag()
        // Started on the thread's loop, not the concurrency pool, which a loaded test run may
        // keep busy: the waits below do not depend on it either.
        let outer = Task(executorPreference: thread.executor) {
            await actor.appendAcrossNestedRun(0) {
                entered.set()
                nestedRun(thread)
            }
        }
        #expect(await onNewThread { waitUntil { entered.isSet } })
        // Calls of the same actor, queued on the loop while its method is inside a nested run.
        let others = Task(executorPreference: thread.executor) {
            await withTaskGroup(of: Void.self) { group in
                for value in 1...10 { group.addTask { await actor.touch(value) } }
            }
        }
        await outer.value
        await others.value
        return (await actor.interleaved, await actor.items)
    }

    @Test("§3.58 a synchronous sendRequest in the default mode inside an actor method runs no other job of that actor")
    func sendRequestInDefaultMode() async throws {
        let (server, service) = try slowServer()
        defer { service.invalidate(); server.stop() }
        let (interleaved, items) = try await callsInsideNestedRun { _ in
            _ = try? service.sendRequest(msgid: 1, timeout: .seconds(20), replyMode: .default)
        }
        #expect(interleaved == 0)
        #expect(items.first == 0, "the outer method finished before the queued calls ran")
        #expect(Set(items) == Set(0...10))
    }

    @Test("§3.58 a synchronous sendRequest in a common mode inside an actor method runs no other job of that actor")
    func sendRequestInACommonMode() async throws {
        let (server, service) = try slowServer()
        defer { service.invalidate(); server.stop() }
        let tracking = ThreadRunLoop.Mode("iso-tracking")
        let (interleaved, items) = try await callsInsideNestedRun { thread in
            thread.runLoop.addCommonMode(tracking)
            _ = try? service.sendRequest(msgid: 1, timeout: .seconds(20), replyMode: tracking)
        }
        #expect(interleaved == 0)
        #expect(items.first == 0)
        #expect(Set(items) == Set(0...10))
    }

    @Test("§3.58 run(mode:before:) of the default mode inside an actor method runs no other job of that actor, but still runs blocks")
    func nestedRunInsideAnActorMethod() async throws {
        let blockRan = Flag()
        let (interleaved, items) = try await callsInsideNestedRun { thread in
            thread.runLoop.perform(inModes: [.default]) { blockRan.set() }
            let end = ContinuousClock.now + .milliseconds(300)
            while ContinuousClock.now < end { ThreadRunLoop.current.run(mode: .default, before: end) }
        }
        #expect(interleaved == 0)
        #expect(items.first == 0)
        #expect(Set(items) == Set(0...10))
        #expect(blockRan.isSet, "a perform block runs in the nested run")
    }
}

/// Two actors on one thread that call each other.
private actor Ping {
    let thread: ResidentThread
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    var rounds = 0
    init(thread: ResidentThread) { self.thread = thread }

    func play(with pong: Pong, rounds total: Int, started: Flag) async {
        for _ in 0..<total {
            await pong.hit()
            rounds += 1
            if rounds == 10 { started.set() }
        }
    }
}

private actor Pong {
    let thread: ResidentThread
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    var hits = 0
    init(thread: ResidentThread) { self.thread = thread }
    func hit() { hits += 1 }
}

private actor Tally {
    let thread: ResidentThread
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    var count = 0
    init(thread: ResidentThread) { self.thread = thread }
    func add() { count += 1 }
}

@Suite("§3.59 stop with jobs in flight", .serialized)
struct StopWithJobsInFlightTests {

    @Test("§3.59 stop() while two actors on the thread await each other runs their exchange to its end; nothing traps", arguments: 0..<10)
    func chainedActorsFinish(iteration: Int) async throws {
        let thread = ResidentThread(name: uniqueThreadName("stop-chain"))
        let ping = Ping(thread: thread)
        let pong = Pong(thread: thread)
        let started = Flag()
        let game = Task(executorPreference: thread.executor) {
            await ping.play(with: pong, rounds: underSanitizer ? 2_000 : 100_000, started: started)
        }
        #expect(await onNewThread { waitUntil { started.isSet } })
        // stop() blocks its caller while the thread drains: not a thread of the concurrency pool.
        await onNewThread { thread.stop() }
        // Every round ran on the thread before it exited: reading the actors now would trap.
        #expect(thread.isFinished)
        await game.value
        _ = iteration
    }

    @Test("§3.59 stop() with 3,000 task-group calls (300 under a sanitizer) to a pinned actor in flight runs them all before the thread exits", arguments: 0..<10)
    func taskGroupCallsFinish(iteration: Int) async throws {
        let thread = ResidentThread(name: uniqueThreadName("stop-group"))
        let tally = Tally(thread: thread)
        let counted = Counter()
        let started = Flag()
        let calls = underSanitizer ? 300 : 3_000
        // The calls are made by a task that prefers the thread's loop, so each one is a job of its
        // executor from the start: queued, or enqueued while the stop drains.
        let caller = Task(executorPreference: thread.executor) {
            await withTaskGroup(of: Void.self) { group in
                for _ in 0..<calls {
                    group.addTask {
                        await tally.add()
                        counted.increment()
                        started.set()
                    }
                }
            }
        }
        #expect(await onNewThread { waitUntil { started.isSet } })
        await onNewThread { thread.stop() }
        #expect(counted.current == calls, "\(counted.current) of \(calls) calls ran before the thread exited")
        await caller.value
        _ = iteration
    }
}

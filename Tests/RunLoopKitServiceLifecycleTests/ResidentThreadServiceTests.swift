#if ServiceLifecycle
// ResidentThreadService in this process, driven by ServiceLifecycleTestKit's graceful-shutdown
// trigger and by task cancellation: what run() does with the thread and the ports.

import Dispatch
import RunLoopKit
import RunLoopKitServiceLifecycle
import ServiceLifecycle
import ServiceLifecycleTestKit
import Synchronization
import Testing

/// Holds a service's thread inside a block until released, so messages queue behind it.
private final class Hold: Sendable {
    private let released = DispatchSemaphore(value: 0)
    /// Returns once the thread is inside the block.
    init(_ thread: ResidentThread) throws {
        let entered = DispatchSemaphore(value: 0)
        try thread.perform { [released] in
            entered.signal()
            released.wait()
        }
        entered.wait()
    }
    func release() { released.signal() }
}

/// A service that releases a hold when graceful shutdown reaches it.
private struct Releaser: Service {
    let hold: Hold
    func run() async throws {
        try? await gracefulShutdown()
        hold.release()
    }
}

/// Checks `condition` every millisecond until it holds or `limit` (a hang guard) passes,
/// without holding a thread of the cooperative pool.
private func eventually(limit: Duration = .seconds(30), _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + limit
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return true
}

private final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

private func fill(_ port: MessagePort, with count: Int) throws {
    for index in 0..<count { try port.send(msgid: UInt32(index), timeout: .seconds(10)) }
}

@Suite("ResidentThreadService")
struct ResidentThreadServiceTests {
    // More messages than one pass delivers, so a thread stopped without a drain could not
    // have delivered them all.
    static let inFlight = 1000

    @Test("graceful shutdown: messages in flight are all delivered, then the thread stops and the port is invalidated")
    func gracefulShutdownDrains() async throws {
        let service = ResidentThreadService(name: "svc-drain", drainTimeout: .seconds(60))
        let port = try MessagePort()
        let delivered = Tally()
        port.setHandler { _ in delivered.add() }
        service.add(port)
        let hold = try Hold(service.thread)
        try fill(port, with: Self.inFlight)

        // A group shuts its services down in reverse order, one at a time: the releaser hears of
        // shutdown first and lets the thread go only then, so the messages are still queued
        // when the service's own shutdown begins.
        let group = ServiceGroup(services: [service, Releaser(hold: hold)])
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        #expect(delivered.value == Self.inFlight)
        #expect(port.discardedCount == 0)
        #expect(service.thread.isFinished)
        #expect(!port.isValid)
    }

    @Test("graceful shutdown: a queue that cannot drain (no handler) holds the service only until drainTimeout; its messages are discarded")
    func drainEndsAtTheTimeout() async throws {
        let service = ResidentThreadService(name: "svc-stuck", drainTimeout: .milliseconds(100))
        let port = try MessagePort()
        service.add(port)
        try fill(port, with: 7)

        try await testGracefulShutdown { trigger in
            trigger.triggerGracefulShutdown()
            try await service.run()
        }
        #expect(service.thread.isFinished)
        #expect(port.discardedCount == 7)
        #expect(!port.isValid)
    }

    @Test("cancellation: no drain — the thread stops, queued messages are discarded, run() throws CancellationError")
    func cancellationStopsAtOnce() async throws {
        let service = ResidentThreadService(name: "svc-cancel", drainTimeout: .seconds(60))
        let port = try MessagePort()
        service.add(port)
        try fill(port, with: 4)

        let run = Task { try await service.run() }
        run.cancel()
        await #expect(throws: CancellationError.self) { try await run.value }
        #expect(service.thread.isFinished)
        #expect(port.discardedCount == 4)
        #expect(!port.isValid)
    }

    @Test("cancellation during a drain cuts it short: run() returns instead of waiting out the drain timeout")
    func cancellationCutsTheDrainShort() async throws {
        let service = ResidentThreadService(name: "svc-cut", drainTimeout: .seconds(3600))
        let port = try MessagePort()
        service.add(port)
        try fill(port, with: 3)
        // The drain hands the loop a block that checks the queues on its thread: that block
        // (a handled source; nothing else runs on this idle loop) tells the test the drain has
        // begun. (A wake-up would not: the loop may still be awake from adding the port.)
        let handledBefore = service.runLoop.statistics.handledSources

        // run() gets a thread of its own: on the cooperative pool it would queue behind the
        // whole suite's tests, which can take longer than the hang guard below.
        let runner = ResidentThread(name: "svc-cut-runner")
        defer { runner.stop() }
        try await testGracefulShutdown { trigger in
            trigger.triggerGracefulShutdown()
            let run = Task(executorPreference: runner.executor) { try await service.run() }
            // A long hang guard: graceful shutdown reaches run() through swift-service-lifecycle's
            // own tasks on the cooperative pool, which the suite's synchronous tests (two pool
            // threads on two cores) can hold for tens of seconds.
            #expect(await eventually(limit: .seconds(180)) { service.runLoop.statistics.handledSources > handledBefore },
                    "the drain never ran its check on the service's thread")
            run.cancel()
            try await run.value
        }
        #expect(service.thread.isFinished)
        #expect(port.discardedCount == 3)
    }

    @Test("an empty service shuts down gracefully: the thread stops and run() returns")
    func emptyServiceStops() async throws {
        let service = ResidentThreadService(name: "svc-empty")
        #expect(service.ports.isEmpty)
        try await testGracefulShutdown { trigger in
            trigger.triggerGracefulShutdown()
            try await service.run()
        }
        #expect(service.thread.isFinished)
    }

    @Test("add(_:forMode:) schedules the port on the service's thread, once however often it is added")
    func addSchedulesOnTheThread() throws {
        let service = ResidentThreadService(name: "svc-add")
        defer { service.thread.stop() }
        let port = try MessagePort()
        let thread = Ref<String>()
        let done = DispatchSemaphore(value: 0)
        // The handler captures the loop, not the service, which holds the port.
        let serviceLoop = service.runLoop
        port.setHandler { _ in
            thread.set(ThreadRunLoop.current === serviceLoop ? "service" : "other")
            done.signal()
        }
        service.add(port)
        service.add(port)
        #expect(service.ports == [port])
        try port.send(msgid: 1, timeout: .seconds(10))
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(thread.get() == "service")
        #expect(service.description == "ResidentThreadService(\"svc-add\")")
    }

    @Test("a service made from an existing thread serves that thread")
    func wrapsAnExistingThread() async throws {
        let thread = ResidentThread(name: "svc-given")
        let service = ResidentThreadService(thread: thread, drainTimeout: .seconds(5))
        #expect(service.thread === thread)
        #expect(service.drainTimeout == .seconds(5))
        try await testGracefulShutdown { trigger in
            trigger.triggerGracefulShutdown()
            try await service.run()
        }
        #expect(thread.isFinished)
    }
}

private final class Ref<T: Sendable>: Sendable {
    private let value = Mutex<T?>(nil)
    func set(_ newValue: T) { value.withLock { $0 = newValue } }
    func get() -> T? { value.withLock { $0 } }
}
#endif

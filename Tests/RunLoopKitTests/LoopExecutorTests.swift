// Guarantees §3.21: a loop as a Swift concurrency executor (serial and task executor).

import Glibc
import RunLoopKit
import Synchronization
import Testing

/// An actor pinned to a resident thread: every method runs on that thread.
actor PinnedCounter {
    let thread: ResidentThread
    private(set) var value = 0
    /// Calls that found themselves off the resident thread (must stay 0).
    private(set) var offThread = 0
    private let threadTID: pid_t

    init(thread: ResidentThread) {
        self.thread = thread
        threadTID = (try? onThread(thread) { gettid() }) ?? -1
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }

    func increment() {
        if gettid() != threadTID { offThread += 1 }
        value += 1
    }

    func bump() { value += 1 }
}

/// Runs `body` on a resident thread and returns its result.
func onThread<T: Sendable>(_ thread: ResidentThread, _ body: @escaping @Sendable () -> T) throws -> T {
    let result = Ref<T>()
    try thread.perform(waitUntilDone: true) { result.value = body() }
    return result.value!
}

@Suite("§3.21 LoopExecutor")
struct LoopExecutorTests {

    @Test("§3.21 executor: one per loop, the same instance every time, and the resident thread's is its loop's")
    func oneExecutorPerLoop() {
        let thread = ResidentThread(name: uniqueThreadName("ex-id"))
        defer { thread.stop() }
        #expect(thread.executor === thread.runLoop.executor)
        #expect(thread.runLoop.executor === thread.runLoop.executor)
        #expect(thread.executor.runLoop === thread.runLoop)
        let other = ResidentThread(name: uniqueThreadName("ex-id2"))
        defer { other.stop() }
        #expect(other.executor != thread.executor)
        #expect(thread.executor.description.contains("ex-id"))
    }

    @Test("§3.21 an actor pinned to a ResidentThread: 4 tasks × 10,000 calls, no lost update, every call on the resident thread")
    func pinnedActorRunsEveryCallOnItsThread() async {
        let counter = PinnedCounter(thread: ResidentThread(name: uniqueThreadName("ex-act")))
        defer { counter.thread.stop() }
        let calls = environment("RUNLOOPKIT_SANITIZER") != nil ? 1_000 : 10_000
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    for _ in 0..<calls { await counter.increment() }
                }
            }
        }
        #expect(await counter.value == 4 * calls)
        #expect(await counter.offThread == 0)
    }

    @Test("§3.21 jobs run on the loop's thread in FIFO order with perform blocks")
    func jobsAreFIFOWithBlocks() async throws {
        let thread = ResidentThread(name: uniqueThreadName("ex-fifo"))
        defer { thread.stop() }
        let order = Recorder<String>()
        let release = Flag()
        // Hold the loop in a block while the work is queued, so that it is all queued before any runs.
        try thread.perform { _ = waitUntil(timeout: waitLimit) { release.isSet } }
        try thread.perform { order.append("block 1") }
        let job = Task(executorPreference: thread.executor) { order.append("job") }
        try thread.perform { order.append("block 2") }
        release.set()
        await job.value
        #expect(await eventually { order.count == 3 })
        #expect(order.values == ["block 1", "job", "block 2"])
    }

    @Test("§3.21 a job wakes the loop and counts as a handled source")
    func jobCountsAsHandledSource() async throws {
        let ran = Flag()
        let looper = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(looper.waitUntilSleeping())
        await Task(executorPreference: looper.loop.executor) { ran.set() }.value
        #expect(looper.join() == .handledSource)
        #expect(ran.isSet)
    }

    @Test("§3.21 a pending job keeps a common mode alive, as a block does")
    func pendingJobKeepsModeAlive() async throws {
        let ran = Flag()
        let looper = LoopThread(gated: true) { loop -> RLResult in
            loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        let job = Task(executorPreference: looper.loop.executor) { ran.set() }
        // The job is queued before the (otherwise empty) default mode runs.
        looper.go()
        #expect(looper.join() == .finished)
        await job.value
        #expect(ran.isSet)
    }

    @Test("§3.21 jobs run in common modes only: not while the loop runs a private mode")
    func jobsWaitForACommonMode() async throws {
        let ran = Flag()
        let privateMode = RLMode("ex.private")
        let looper = LoopThread { loop -> (RLResult, Bool, RLResult) in
            loop.add(keepAliveSource(), forMode: privateMode)
            let first = loop.run(mode: privateMode, for: .milliseconds(300), returnAfterSourceHandled: true)
            let ranInPrivate = ran.isSet
            let second = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (first, ranInPrivate, second)
        }
        #expect(looper.waitUntilSleeping(in: privateMode))
        let job = Task(executorPreference: looper.loop.executor) { ran.set() }
        let (first, ranInPrivate, second) = try #require(looper.join())
        await job.value
        #expect(first == .timedOut)
        #expect(!ranInPrivate)
        #expect(second == .handledSource)
    }

    @Test("§3.21 assumeIsolated succeeds inside the port handler, timer and observer of the actor's thread")
    func assumeIsolatedInsideLoopCallbacks() async throws {
        let counter = PinnedCounter(thread: ResidentThread(name: uniqueThreadName("ex-iso")))
        defer { counter.thread.stop() }
        let seen = Recorder<String>()
        let loop = counter.thread.runLoop
        let port = try MessagePort()
        port.setHandler { _ in
            counter.assumeIsolated { $0.bump() }
            seen.append("port")
        }
        loop.add(port, forMode: .default)
        try port.send(msgid: 1, timeout: waitLimit)
        loop.add(RunLoopTimer(fireAt: .now) { _ in
            counter.assumeIsolated { $0.bump() }
            seen.append("timer")
        }, forMode: .default)
        loop.add(RunLoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in
            counter.preconditionIsolated()
            counter.assumeIsolated { $0.bump() }
            seen.append("observer")
        }, forMode: .default)
        loop.wakeUp()
        #expect(await eventually { seen.count == 3 })
        #expect(Set(seen.values) == ["port", "timer", "observer"])
        #expect(await counter.value == 3)
        port.invalidate()
    }

    @Test("§3.21 withTaskExecutorPreference runs nonisolated async work on the loop's thread")
    func taskExecutorPreferenceRunsOnTheLoopThread() async throws {
        let thread = ResidentThread(name: uniqueThreadName("ex-pref"))
        defer { thread.stop() }
        let loopTID = try onThread(thread) { gettid() }
        let tids = await withTaskExecutorPreference(thread.executor) { () async -> [pid_t] in
            var tids = [gettid()]
            await Task.yield()
            tids.append(gettid())
            async let child = gettid()
            tids.append(await child)
            return tids
        }
        #expect(tids == [loopTID, loopTID, loopTID])
    }

    @Test("§3.21 Task(executorPreference: loop.executor), 20 times: each task runs on the loop's thread, and the executor and its loop are freed once the thread ends")
    func executorPreferenceKeepsNoReference() async throws {
        let freed = try await runPreferringTasks(count: 20)
        #expect(await eventually { freed.executor == nil && freed.loop == nil },
                "the loop or its executor outlived the thread: a reference was taken and not given back")
    }

    @Test("§3.21 isIsolatingCurrentContext reports the loop's thread")
    func isolationReportsTheLoopThread() throws {
        let thread = ResidentThread(name: uniqueThreadName("ex-ctx"))
        defer { thread.stop() }
        let executor = thread.executor
        #expect(executor.isIsolatingCurrentContext() == nil)
        #expect(try onThread(thread) { executor.isIsolatingCurrentContext() } == true)
    }
}

/// Weak references to a loop and its executor, to see whether they were freed.
final class FreedCheck: @unchecked Sendable {
    weak var loop: ThreadRunLoop?
    weak var executor: LoopExecutor?
}

/// Runs `count` tasks that prefer a fresh resident thread's executor, checks each ran on that
/// thread, then stops the thread. In a function of its own, so that nothing of the thread
/// outlives it (a debug build keeps locals alive to the end of their scope).
private func runPreferringTasks(count: Int) async throws -> FreedCheck {
    let check = FreedCheck()
    let thread = ResidentThread(name: uniqueThreadName("ex-pref-free"))
    check.loop = thread.runLoop
    check.executor = thread.executor
    let loopTID = try onThread(thread) { gettid() }
    for _ in 0..<count {
        let tid = await Task(executorPreference: thread.executor) { gettid() }.value
        #expect(tid == loopTID)
    }
    thread.stop()
    #expect(await eventually { thread.isFinished })
    return check
}

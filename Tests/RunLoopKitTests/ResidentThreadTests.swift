// Guarantees §3.17: ResidentThread.

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing

/// Kernel tid of a resident thread (asked on the thread itself).
func residentTID(_ thread: ResidentThread) throws -> pid_t {
    let tid = Ref<pid_t>()
    try thread.perform(waitUntilDone: true) { tid.value = gettid() }
    return tid.value ?? -1
}

@Suite("§3.17 ResidentThread")
struct ResidentThreadTests {

    @Test("§3.17 init starts the thread and returns once its loop is running; name and runLoop are exposed")
    func initStartsRunningThread() throws {
        let name = uniqueThreadName("rt-init")
        let thread = ResidentThread(name: name)
        defer { thread.stop() }
        #expect(thread.name == name)
        #expect(!thread.isFinished)
        #expect(waitUntil { thread.runLoop.currentMode == .default }, "the resident loop is not running the default mode")
        let loopOnThread = Ref<ThreadRunLoop>()
        try thread.perform(waitUntilDone: true) { loopOnThread.value = ThreadRunLoop.current }
        #expect(loopOnThread.value === thread.runLoop)
    }

    @Test("§3.17 the name is visible in /proc/self/task/*/comm")
    func nameIsVisibleInProcComm() throws {
        let name = uniqueThreadName("rt-nm")
        #expect(name.utf8.count <= 15)
        let thread = ResidentThread(name: name)
        defer { thread.stop() }
        let tid = try residentTID(thread)
        #expect(readText("/proc/self/task/\(tid)/comm") == name + "\n")
        #expect(processThreads().contains { $0.name == name })
    }

    @Test("§3.17 perform runs the block on the resident thread; blocks run in order")
    func performRunsOnTheThreadInOrder() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-ord"))
        defer { thread.stop() }
        let tid = try residentTID(thread)
        let log = Recorder<(Int, pid_t)>()
        for i in 0..<100 { try thread.perform { log.append((i, gettid())) } }
        try thread.perform(waitUntilDone: true) {}
        #expect(log.values.map(\.0) == Array(0..<100))
        #expect(log.values.allSatisfy { $0.1 == tid })
        #expect(tid != gettid())
    }

    @Test("§3.17 perform counts as a handled source: run(mode:before:) on the worker returns after it")
    func performCountsAsHandledSource() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-hs"))
        defer { thread.stop() }
        let nested = Ref<Bool>()
        let ran = Flag()
        // A block on the worker that runs its loop in another mode, as a worker's
        // `while run(mode:before:)` does; another perform must make it return.
        try thread.perform {
            thread.runLoop.add(keepAliveSource(), forMode: "work")
            nested.value = thread.runLoop.run(mode: "work", before: .now + .seconds(60))
        }
        #expect(waitUntil { thread.runLoop.currentMode == "work" && thread.runLoop.isWaiting })
        try thread.perform(inModes: ["work"]) { ran.set() }
        #expect(waitUntil { nested.value != nil }, "run(mode:before:) did not return after the perform")
        #expect(nested.value == true)
        #expect(ran.isSet)
    }

    @Test("§3.17 perform inModes runs only when the resident loop runs one of those modes")
    func performInModesOnResidentThread() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-md"))
        defer { thread.stop() }
        let ranIn = Ref<RLMode>()
        try thread.perform(inModes: ["special"]) { ranIn.value = thread.runLoop.currentMode }
        try thread.perform(waitUntilDone: true) {}  // a default-mode round trip
        settle()
        #expect(ranIn.value == nil, "the block for mode 'special' ran in the default mode")
        try thread.perform {
            _ = thread.runLoop.run(mode: "special", for: .seconds(30), returnAfterSourceHandled: true)
        }
        #expect(waitUntil { ranIn.value != nil })
        #expect(ranIn.value == "special")
    }

    @Test("§3.17 perform(waitUntilDone: true) blocks the caller until the block ran")
    func waitUntilDoneBlocksUntilBlockRan() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-wud"))
        defer { thread.stop() }
        let finished = Flag()
        let r = onFreshThread(timeout: .seconds(30)) { () -> Bool in
            do {
                try thread.perform(waitUntilDone: true) {
                    block(for: .milliseconds(100))
                    finished.set()
                }
            } catch { return false }
            return finished.isSet
        }
        #expect(r != nil, "perform(waitUntilDone: true) did not return")
        #expect(r == true, "perform(waitUntilDone: true) returned before the block finished")
    }

    @Test("§3.17 perform(waitUntilDone: true) called on the thread itself runs the block inline")
    func waitUntilDoneOnOwnThreadRunsInline() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-inl"))
        defer { thread.stop() }
        let log = Recorder<String>()
        let r = onFreshThread(timeout: .seconds(30)) { () -> Bool in
            do {
                try thread.perform(waitUntilDone: true) {
                    log.append("outer start")
                    do {
                        try thread.perform(waitUntilDone: true) { log.append("inner") }
                    } catch { log.append("inner threw \(error)") }
                    log.append("outer end")
                }
                return true
            } catch { return false }
        }
        #expect(r == true, "deadlock: waitUntilDone on the thread itself did not run inline")
        #expect(log.values == ["outer start", "inner", "outer end"])
    }

    @Test("§3.17 perform on a finished thread throws .finished, never crashes")
    func performOnFinishedThreadThrowsFinished() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-fin"))
        let tid = try residentTID(thread)
        thread.stop()
        #expect(thread.isFinished)
        #expect(!threadExists(tid) || waitUntil { !threadExists(tid) }, "the thread did not exit on stop()")
        let ran = Flag()
        #expect(throws: ResidentThread.Failure.finished) { try thread.perform { ran.set() } }
        #expect(throws: ResidentThread.Failure.finished) { try thread.perform(waitUntilDone: true) { ran.set() } }
        #expect(throws: ResidentThread.Failure.finished) {
            try thread.perform(waitUntilDone: false, inModes: [.common]) { ran.set() }
        }
        #expect(!ran.isSet)
    }

    @Test("§3.17 stop() waits for the thread to exit and is idempotent (also concurrently)")
    func stopIsIdempotent() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-stp"))
        let tid = try residentTID(thread)
        #expect(threadExists(tid))
        let stopped = Counter()
        for _ in 0..<3 { startThread { thread.stop(); stopped.increment() } }
        #expect(waitUntil { stopped.current == 3 }, "concurrent stop() calls did not all return")
        thread.stop()
        thread.stop()
        #expect(thread.isFinished)
        #expect(!threadExists(tid), "stop() returned before the thread exited")
    }

    @Test("§3.17 a block that is running when stop() is called finishes first")
    func stopLetsRunningBlockFinish() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-stb"))
        let started = Flag(), finished = Flag()
        try thread.perform {
            started.set()
            block(for: .milliseconds(100))
            finished.set()
        }
        #expect(waitUntil { started.isSet })
        let done = onFreshThread(timeout: .seconds(30)) { () -> Bool in thread.stop(); return true }
        #expect(done == true)
        #expect(finished.isSet)
        #expect(thread.isFinished)
    }

    @Test("§3.17 deinit stops the thread")
    func deinitStopsThread() throws {
        let weak: WeakRef<ResidentThread>
        let tid: pid_t
        do {
            let thread = ResidentThread(name: uniqueThreadName("rt-dei"))
            tid = try residentTID(thread)
            weak = WeakRef(thread)
        }
        #expect(waitUntil { weak.object == nil }, "the ResidentThread was never deallocated")
        #expect(waitUntil { !threadExists(tid) }, "the thread outlived its ResidentThread")
    }

    @Test("§3.17 dropping the last reference on the thread itself does not deadlock")
    func droppingLastReferenceOnTheThreadItselfDoesNotDeadlock() throws {
        let holder = Ref<ResidentThread>()
        let proceed = Flag()
        let blockEnded = Flag()
        let weak: WeakRef<ResidentThread>
        let tid: pid_t
        do {
            let thread = ResidentThread(name: uniqueThreadName("rt-own"))
            tid = try residentTID(thread)
            weak = WeakRef(thread)
            holder.value = thread
            // The block captures a strong reference; it is released on the thread itself
            // after the block ran, once every other reference is gone.
            try thread.perform { [thread] in
                _ = waitUntil(timeout: .seconds(30)) { proceed.isSet }
                _ = thread.name
                blockEnded.set()
            }
        }
        _ = holder.take()  // drop the outside references: the block's capture is now the only one
        proceed.set()
        #expect(waitUntil { blockEnded.isSet })
        #expect(waitUntil { weak.object == nil }, "the ResidentThread was never deallocated")
        #expect(waitUntil { !threadExists(tid) }, "the thread is stuck after dropping its last reference on itself")
    }

    @Test("§3.17 perform from many threads with waitUntilDone keeps working")
    func concurrentWaitUntilDone() throws {
        let thread = ResidentThread(name: uniqueThreadName("rt-cc"))
        defer { thread.stop() }
        let total = Counter()
        let finishedCallers = Counter()
        for _ in 0..<4 {
            startThread {
                for _ in 0..<100 { try? thread.perform(waitUntilDone: true) { total.increment() } }
                finishedCallers.increment()
            }
        }
        #expect(waitUntil(timeout: .seconds(60)) { finishedCallers.current == 4 })
        #expect(total.current == 400)
    }
}

// Guarantees §3.54: perform without modes runs in the common modes, as Foundation's
// performSelector:onThread: and performSelectorOnMainThread: do; perform(after:) stays in the
// default mode; ThreadRunLoop.perform(waitUntilDone:) reaches any loop.

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing

private let tracking = ThreadRunLoop.Mode("tracking")

@Suite("§3.54 perform in the common modes")
struct PerformCommonModesTests {

    @Test("§3.54 ResidentThread.perform without modes runs during a run of a common \"tracking\" mode")
    func residentPerformRunsInATrackingMode() throws {
        let thread = ResidentThread(name: uniqueThreadName("perf-track"))
        defer { thread.stop() }
        let inTracking = Flag()
        let ranIn = Ref<ThreadRunLoop.Mode>()
        let endTracking = Flag()
        try thread.perform(inModes: [.default]) {
            let loop = ThreadRunLoop.current
            loop.addCommonMode(tracking)
            loop.add(farFutureTimer(), forMode: tracking)
            inTracking.set()
            while !endTracking.isSet {
                loop.run(mode: tracking, before: .now + .milliseconds(50))
            }
        }
        #expect(waitUntil { inTracking.isSet })
        try thread.perform { ranIn.value = ThreadRunLoop.current.currentMode }
        #expect(waitUntil { ranIn.value != nil }, "the block did not run while the thread tracked")
        endTracking.set()
        #expect(ranIn.value == tracking)
    }

    @Test("§3.54 ThreadRunLoop.perform(waitUntilDone:) without modes runs during a common \"tracking\" mode, and waits for it")
    func loopPerformWaitsAndRunsInATrackingMode() throws {
        let endTracking = Flag()
        let started = Flag()
        let looper = LoopThread { loop -> Void in
            loop.addCommonMode(tracking)
            loop.add(farFutureTimer(), forMode: tracking)
            started.set()
            while !endTracking.isSet {
                loop.run(mode: tracking, before: .now + .milliseconds(50))
            }
        }
        #expect(waitUntil { started.isSet })
        let ranIn = Ref<ThreadRunLoop.Mode>()
        try looper.loop.perform(waitUntilDone: true) { ranIn.value = ThreadRunLoop.current.currentMode }
        #expect(ranIn.value == tracking, "waitUntilDone returned once the block ran, in the tracking mode")
        endTracking.set()
        #expect(looper.join() != nil)
    }

    @Test("§3.54 ThreadRunLoop.perform(waitUntilDone: true) on the loop's own thread runs the block inline")
    func waitUntilDoneInlineOnTheLoopThread() throws {
        let result = onLoopThread { loop -> (Bool, Bool)? in
            let ran = Flag()
            do {
                try loop.perform(waitUntilDone: true) { ran.set() }
            } catch {
                return nil
            }
            // Inline: it ran before perform returned, without the loop running.
            return (ran.isSet, loop.currentMode == nil)
        }
        let (ran, notRunning) = try #require(result ?? nil)
        #expect(ran)
        #expect(notRunning)
    }

    @Test("§3.54 ThreadRunLoop.perform(waitUntilDone: true) to a loop whose thread has exited throws .finished, and the block does not run")
    func performToAnExitedThreadThrows() throws {
        let looper = LoopThread { loop -> ThreadRunLoop in loop }
        let loop = try #require(looper.join())
        #expect(waitUntil { !threadIsAlive(looper.tid) })
        let ran = Flag()
        #expect(throws: ResidentThread.Failure.finished) {
            try loop.perform(waitUntilDone: true) { ran.set() }
        }
        #expect(throws: ResidentThread.Failure.finished) {
            try loop.perform(waitUntilDone: false) { ran.set() }
        }
        #expect(!ran.isSet)
    }

    @Test("§3.54 a waiting perform whose thread exits before the block ran throws .finished")
    func waitingPerformLearnsOfTheExit() throws {
        let exit = Flag()
        let looper = LoopThread { _ -> Void in _ = waitUntil { exit.isSet } }
        // The loop never runs: the block is dropped when the thread exits, and the waiter told.
        let waiter = Ref<Result<Void, ResidentThread.Failure>>()
        startThread {
            waiter.value = Result { () throws(ResidentThread.Failure) in
                try looper.loop.perform(waitUntilDone: true) {}
            }
        }
        exit.set()
        #expect(waitUntil { waiter.value != nil })
        #expect(throws: ResidentThread.Failure.finished) { try waiter.value?.get() }
    }

    @Test("§3.54 perform(after:) stays in the default mode: it does not run during a common \"tracking\" mode")
    func performAfterWaitsForTheDefaultMode() throws {
        let thread = ResidentThread(name: uniqueThreadName("perf-after"))
        defer { thread.stop() }
        let ranIn = Ref<ThreadRunLoop.Mode>()
        let trackingEnded = Flag()
        try thread.perform(inModes: [.default]) {
            let loop = ThreadRunLoop.current
            loop.addCommonMode(tracking)
            loop.add(farFutureTimer(), forMode: tracking)
            loop.perform(after: .milliseconds(10)) { ranIn.value = ThreadRunLoop.current.currentMode }
            let end = ContinuousClock.now + .milliseconds(300)
            while ContinuousClock.now < end { loop.run(mode: tracking, before: end) }
            trackingEnded.set()
        }
        #expect(waitUntil { ranIn.value != nil })
        #expect(trackingEnded.isSet, "the delayed block ran before the tracking run ended")
        #expect(ranIn.value == .default)
    }
}

/// Whether a thread of this process with kernel id `tid` still exists.
private func threadIsAlive(_ tid: pid_t) -> Bool {
    access("/proc/self/task/\(tid)", F_OK) == 0
}

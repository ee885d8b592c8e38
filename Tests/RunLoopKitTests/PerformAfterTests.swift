// Guarantees §3.24: perform(after:inModes:_:), the seeds' performSelector:afterDelay:.

import Glibc
import RunLoopKit
import Testing

@Suite("§3.24 perform(after:)")
struct PerformAfterTests {

    @Test("§3.24 runs the block on the loop's thread no earlier than the delay, as a one-shot timer that never counts as a handled source")
    func runsOnTheLoopThreadAfterTheDelay() {
        let result = onLoopThread { loop -> (RLResult, Bool, Bool, Bool) in
            let ranOnLoop = Flag()
            let start = ContinuousClock.now
            let firedAt = Ref<ContinuousClock.Instant>()
            let me = pthread_self()
            let timer = loop.perform(after: .milliseconds(50)) {
                if isCurrentThread(me) { ranOnLoop.set() }
                firedAt.value = .now
            }
            // The timer is the mode's only item: once it fired the run finishes, never `.handledSource`.
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            let notEarly = firedAt.value.map { start.duration(to: $0) >= .milliseconds(50) } ?? false
            return (result, ranOnLoop.isSet, notEarly, timer.isValid)
        }
        let (runResult, ranOnLoop, notEarly, stillValid) = try! #require(result)
        #expect(runResult == .finished)
        #expect(ranOnLoop)
        #expect(notEarly)
        #expect(!stillValid)
    }

    @Test("§3.24 runs only in the given modes; invalidating the returned timer cancels it")
    func modesAndCancellation() {
        let result = onLoopThread { loop -> (RLResult, Bool, Bool) in
            let otherMode = RLMode("pa.other")
            let ranCancelled = Flag(), ranInOther = Flag()
            loop.perform(after: .milliseconds(10)) { ranCancelled.set() }.invalidate()
            loop.perform(after: .milliseconds(10), inModes: [otherMode]) { ranInOther.set() }
            loop.add(farFutureTimer(), forMode: .default)
            loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: false)
            let ranInDefault = ranInOther.isSet
            let other = loop.run(mode: otherMode, for: longRun, returnAfterSourceHandled: true)
            return (other, ranInDefault || ranCancelled.isSet, ranInOther.isSet)
        }
        let (otherResult, ranWhereItMustNot, ranInOther) = try! #require(result)
        #expect(!ranWhereItMustNot)
        #expect(ranInOther)
        #expect(otherResult == .finished)
    }
}

// Guarantees §3.13: observers.

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.13 observers")
struct ObserverTests {

    @Test("§3.13 observers are called in ascending order, for every activity")
    func observersAreCalledInAscendingOrder() throws {
        let events = try #require(onLoopThread { loop -> [String] in
            let events = Recorder<String>()
            for order in [5, -2, 1, 100, 0] {
                loop.add(recordingObserver(events, order: order, prefix: "\(order):"), forMode: .default)
            }
            // One pass with a sleep: a timer wakes the loop and the empty mode finishes.
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(20)) { _ in }, forMode: .default)
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return events.values
        })
        let orders = [-2, 0, 1, 5, 100]
        #expect(!events.isEmpty)
        #expect(events.count % orders.count == 0)
        for chunkStart in stride(from: 0, to: events.count - events.count % 5, by: 5) {
            let chunk = Array(events[chunkStart..<chunkStart + 5])
            let activity = chunk[0].split(separator: ":").last!
            #expect(chunk == orders.map { "\($0):\(activity)" }, "\(chunk)")
        }
        #expect(events.first == "-2:entry")
        #expect(events.last == "100:exit")
    }

    @Test("§3.13 an observer with repeats: false is invalidated after its first callout")
    func nonRepeatingObserverInvalidatesAfterFirstCallout() throws {
        let r = try #require(onLoopThread { loop -> (Int, Bool, Bool, Int) in
            let calls = Counter()
            let observer = RunLoopObserver(activities: .allActivities, repeats: false) { _, _ in calls.increment() }
            let validBefore = observer.isValid
            loop.add(observer, forMode: .default)
            loop.perform {}
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            let afterFirstRun = calls.current
            loop.perform {}
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (afterFirstRun, validBefore, observer.isValid, calls.current)
        })
        #expect(r.0 == 1)
        #expect(r.1 == true)
        #expect(r.2 == false)
        #expect(r.3 == 1)
    }

    @Test("§3.13 a repeating observer keeps being called; invalidate() stops it")
    func invalidatedObserverIsNoLongerCalled() throws {
        let r = try #require(onLoopThread { loop -> (Int, Int, Bool) in
            let calls = Counter()
            let observer = RunLoopObserver(activities: .entry) { _, _ in calls.increment() }
            loop.add(observer, forMode: .default)
            for _ in 0..<3 {
                loop.perform {}
                _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            }
            let before = calls.current
            observer.invalidate()
            loop.perform {}
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (before, calls.current, observer.isValid)
        })
        #expect(r.0 == 3)
        #expect(r.1 == 3)
        #expect(r.2 == false)
    }

    @Test("§3.13 an observer sees only the activities it asked for, only in its mode, with itself as argument")
    func observerActivityMaskAndMode() throws {
        let r = try #require(onLoopThread { loop -> ([String], Int, Bool) in
            let events = Recorder<String>()
            let otherMode = Counter()
            let selfRef = WeakRef<RunLoopObserver>()
            let sameObject = Flag()
            let observer = RunLoopObserver(activities: [.entry, .exit]) { o, a in
                if o === selfRef.object { sameObject.set() }
                events.append(activityName(a))
            }
            selfRef.object = observer
            loop.add(observer, forMode: .default)
            loop.add(RunLoopObserver(activities: .allActivities) { _, _ in otherMode.increment() }, forMode: "other")
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(20)) { _ in }, forMode: .default)
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (events.values, otherMode.current, sameObject.isSet)
        })
        #expect(r.0 == ["entry", "exit"])
        #expect(r.1 == 0)
        #expect(r.2)
    }

    @Test("§3.13 an observer removed from its mode is no longer called")
    func removedObserverIsNotCalled() throws {
        let r = try #require(onLoopThread { loop -> Int in
            let calls = Counter()
            let observer = RunLoopObserver(activities: .allActivities) { _, _ in calls.increment() }
            loop.add(observer, forMode: .default)
            loop.remove(observer, forMode: .default)
            loop.perform {}
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return calls.current
        })
        #expect(r == 0)
    }
}

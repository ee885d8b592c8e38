// Guarantees §3.12: timers.

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.12 timers")
struct TimerTests {

    @Test("§3.12 a one-shot timer fires once, on the loop thread, and is invalid once it has fired")
    func oneShotTimerIsInvalidAfterFiring() throws {
        let lt = LoopThread { loop -> (Bool, RLResult, Bool, Int, Bool, Duration) in
            let fires = Counter()
            let onLoopThread = Flag()
            let me = pthread_self()
            let timer = RunLoopTimer(fireAt: .now + .milliseconds(10)) { _ in
                fires.increment()
                if isCurrentThread(me) { onLoopThread.set() }
            }
            let validBefore = timer.isValid
            loop.add(timer, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (validBefore, result, timer.isValid, fires.current, onLoopThread.isSet, timer.interval)
        }
        let r = try #require(lt.join())
        #expect(r.0 == true)
        #expect(r.1 == .finished, "the one-shot timer was still keeping the mode alive")
        #expect(r.2 == false)
        #expect(r.3 == 1)
        #expect(r.4, "the timer handler did not run on the loop thread")
        #expect(r.5 == .zero)
    }

    @Test("§3.12 convenience init(interval:repeats:) first fires at now + interval")
    func convenienceInitFirstFireIsNowPlusInterval() throws {
        let before = ContinuousClock.now
        let timer = RunLoopTimer(interval: .seconds(60), repeats: true) { _ in }
        let after = ContinuousClock.now
        #expect(timer.interval == .seconds(60))
        #expect(timer.fireDate >= before + .seconds(60))
        #expect(timer.fireDate <= after + .seconds(60))
        #expect(timer.isValid)
        timer.invalidate()
        #expect(!timer.isValid)

        let r = try #require(onLoopThread { loop -> (Int, Bool, RLResult) in
            let fires = Counter()
            let once = RunLoopTimer(interval: .milliseconds(10), repeats: false) { _ in fires.increment() }
            loop.add(once, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (fires.current, once.isValid, result)
        })
        #expect(r.0 == 1)
        #expect(r.1 == false)
        #expect(r.2 == .finished)
    }

    @Test("§3.12 setting fireDate from another thread re-arms a loop that is already asleep")
    func settingFireDateFromAnotherThreadReArmsSleepingLoop() throws {
        let fired = Counter()
        let timer = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in fired.increment() }
        let lt = LoopThread { loop -> RLResult in
            loop.add(timer, forMode: "rearm")
            return loop.run(mode: "rearm", for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(in: "rearm"))
        let newDate = ContinuousClock.now + .milliseconds(10)
        timer.fireDate = newDate
        #expect(timer.fireDate == newDate)
        let result = lt.join()
        #expect(result == .finished, "got \(String(describing: result)): the sleeping loop was not re-armed")
        #expect(fired.current == 1)
    }

    @Test("§3.12 a repeating timer that missed fire dates fires once, then on its original grid after now (no burst)")
    func repeatingTimerThatMissedFireDatesDoesNotBurst() throws {
        typealias Instant = ContinuousClock.Instant
        let interval: Duration = .milliseconds(50)
        let t0 = ContinuousClock.now + .milliseconds(30)
        let r = try #require(onLoopThread { loop -> ([Instant], [Instant], [Instant], Instant, RLResult) in
            let mode: RLMode = "grid"
            let starts = Recorder<Instant>()
            let ends = Recorder<Instant>()
            let dates = Recorder<Instant>()
            let timer = RunLoopTimer(fireAt: t0, interval: interval) { t in
                starts.append(.now)
                dates.append(t.fireDate)
                if starts.count == 3 { loop.stop() }
                ends.append(.now)
            }
            loop.add(timer, forMode: mode)
            // A long callout at the start of the run: the timer misses about five fire dates.
            loop.perform(inModes: [mode]) { block(for: interval * 6) }
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            let next = timer.fireDate
            timer.invalidate()
            return (starts.values, ends.values, dates.values, next, result)
        })
        let (starts, ends, dates, next, result) = r
        #expect(result == .stopped)
        try #require(starts.count == 3, "fired \(starts.count) times")
        // The first grid point strictly after `x`.
        func gridAfter(_ x: Instant) -> Instant {
            let k = Int(((x - t0) / interval).rounded(.down)) + 1
            return t0 + interval * k
        }
        func isOnGrid(_ x: Instant) -> Bool {
            let q = (x - t0) / interval
            return abs(q - q.rounded()) < 0.001
        }
        // No burst: after each fire, the next one waits for the next grid date after that
        // callout. (Timers never fire before their date; 2 ms allows for clock-domain rounding.)
        let slack: Duration = .milliseconds(2)
        for k in 0..<2 {
            #expect(starts[k + 1] >= gridAfter(ends[k]) - slack,
                    "fire \(k + 2) came \(gridAfter(ends[k]) - starts[k + 1]) before the next grid date: catch-up burst")
        }
        // Every fire date, and the date scheduled after the last fire, is on the original grid.
        for (k, d) in dates.enumerated() {
            #expect(isOnGrid(d), "fire \(k + 1): fireDate \(d - t0) after t0 is off the \(interval) grid")
        }
        #expect(isOnGrid(next), "next fire date \(next - t0) after t0 is off the \(interval) grid")
    }

    @Test("§3.12 tolerance coalesces wake-ups: two timers with overlapping windows fire in one wake-up")
    func toleranceCoalescesWakeUps() throws {
        let events = try #require(onLoopThread { loop -> [String] in
            let mode: RLMode = "coalesce"
            let events = Recorder<String>()
            let base = ContinuousClock.now
            // Windows: A [100 ms, 500 ms], B [300 ms, 300 ms] — they overlap at 300 ms.
            let a = RunLoopTimer(fireAt: base + .milliseconds(100), tolerance: .milliseconds(400)) { _ in
                events.append("A")
            }
            let b = RunLoopTimer(fireAt: base + .milliseconds(300)) { _ in events.append("B") }
            loop.add(a, forMode: mode)
            loop.add(b, forMode: mode)
            loop.add(recordingObserver(events, activities: .afterWaiting), forMode: mode)
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            events.append("result:\(result)")
            return events.values
        })
        #expect(events.filter { $0 == "afterWaiting" }.count == 1, "wake-ups: \(events)")
        #expect(events.contains("A") && events.contains("B"))
        #expect(events.last == "result:finished")
    }

    @Test("§3.12 tolerance is readable and settable")
    func toleranceProperty() {
        let t = RunLoopTimer(fireAt: .now + .seconds(10), interval: .seconds(1), tolerance: .milliseconds(5)) { _ in }
        #expect(t.tolerance == .milliseconds(5))
        t.tolerance = .milliseconds(250)
        #expect(t.tolerance == .milliseconds(250))
        #expect(t.interval == .seconds(1))
        t.invalidate()
    }

    @Test("§3.12 setting fireDate reschedules: later postpones a due timer, earlier brings a far one forward")
    func settingFireDateReschedules() throws {
        let r = try #require(onLoopThread { loop -> (Int, Int, RLResult, Int, RLResult) in
            let postponedFires = Counter()
            let stopperFires = Counter()
            let postponed = RunLoopTimer(fireAt: .now) { _ in postponedFires.increment() }
            postponed.fireDate = .now + .seconds(3600)
            loop.add(postponed, forMode: "later")
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(100)) { _ in
                stopperFires.increment()
                loop.stop()
            }, forMode: "later")
            let first = loop.run(mode: "later", for: longRun, returnAfterSourceHandled: false)
            postponed.invalidate()

            let broughtForwardFires = Counter()
            let far = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in broughtForwardFires.increment() }
            loop.add(far, forMode: "sooner")
            far.fireDate = .now + .milliseconds(10)
            let second = loop.run(mode: "sooner", for: longRun, returnAfterSourceHandled: false)
            return (postponedFires.current, stopperFires.current, first, broughtForwardFires.current, second)
        })
        #expect(r.0 == 0, "the postponed timer fired at its old date")
        #expect(r.1 == 1)
        #expect(r.2 == .stopped)
        #expect(r.3 == 1)
        #expect(r.4 == .finished)
    }

    @Test("§3.12 invalidating the only timer after its second fire ends the run with .finished")
    func invalidatingOnlyTimerAfterSecondFireEndsRunWithFinished() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int, Bool) in
            let fires = Counter()
            let timer = RunLoopTimer(fireAt: .now + .milliseconds(10), interval: .milliseconds(10)) { t in
                if fires.increment() == 2 { t.invalidate() }
            }
            loop.add(timer, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (result, fires.current, timer.isValid)
        })
        #expect(r.0 == .finished)
        #expect(r.1 == 2)
        #expect(r.2 == false)
    }

    @Test("§3.12 the seed's timer-count example: run() returns once the counting timer invalidates itself")
    func runReturnsAfterTimerCountExample() throws {
        let r = try #require(onLoopThread { loop -> Int in
            let count = Counter()
            let timer = RunLoopTimer(interval: .milliseconds(5), repeats: true) { t in
                if count.increment() == 3 { t.invalidate() }
            }
            loop.add(timer, forMode: .default)
            loop.run()
            return count.current
        })
        #expect(r == 3)
    }

    @Test("§3.12/§3.10 a timer in a custom mode does not fire while the loop runs the default mode")
    func timerInCustomModeDoesNotFireInDefaultMode() throws {
        let r = try #require(onLoopThread { loop -> (Int, RLResult, Int, RLResult) in
            let customFires = Counter()
            loop.add(RunLoopTimer(fireAt: .now) { _ in customFires.increment() }, forMode: "custom")
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(150)) { _ in loop.stop() }, forMode: .default)
            let inDefault = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            let firesInDefault = customFires.current
            let inCustom = loop.run(mode: "custom", for: longRun, returnAfterSourceHandled: false)
            return (firesInDefault, inDefault, customFires.current, inCustom)
        })
        #expect(r.0 == 0, "the custom-mode timer fired while the loop ran the default mode")
        #expect(r.1 == .stopped)
        #expect(r.2 == 1)
        #expect(r.3 == .finished)
    }

    @Test("§3.12/§3.9 a timer added to .common fires in a custom mode made common later")
    func timerInCommonFiresInModeMadeCommonLater() throws {
        let r = try #require(onLoopThread { loop -> (Int, RLResult) in
            let fires = Counter()
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(10)) { _ in fires.increment() }, forMode: .common)
            loop.addCommonMode("tracking")
            let result = loop.run(mode: "tracking", for: longRun, returnAfterSourceHandled: false)
            return (fires.current, result)
        })
        #expect(r.0 == 1)
        #expect(r.1 == .finished)
    }

    @Test("§3.12 a timer removed from its mode does not fire")
    func removedTimerDoesNotFire() throws {
        let r = try #require(onLoopThread { loop -> (Int, RLResult) in
            let fires = Counter()
            let t = RunLoopTimer(fireAt: .now) { _ in fires.increment() }
            loop.add(t, forMode: .default)
            loop.remove(t, forMode: .default)
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(100)) { _ in loop.stop() }, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (fires.current, result)
        })
        #expect(r.0 == 0)
        #expect(r.1 == .stopped)
    }

    @Test("§3.12 the loop's clock is ContinuousClock: timers never fire before their fireDate, perform(after:) dates from now")
    func timersReadTheContinuousClock() throws {
        let r = try #require(onLoopThread { loop -> (early: Int, fired: Int, datedFromNow: Bool) in
            let early = Counter()
            let fired = Counter()
            // Dates a few microseconds to a few milliseconds ahead, so that a loop clock even
            // slightly ahead of ContinuousClock would fire some of them early.
            for step in 0..<200 {
                let date = ContinuousClock.now + .microseconds(step * 17)
                loop.add(RunLoopTimer(fireAt: date) { _ in
                    if ContinuousClock.now < date { early.increment() }
                    fired.increment()
                }, forMode: .default)
            }
            let before = ContinuousClock.now
            let later = loop.perform(after: .seconds(5)) {}
            let after = ContinuousClock.now
            let datedFromNow = later.fireDate >= before + .seconds(5) && later.fireDate <= after + .seconds(5)
            later.invalidate()
            loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (early.current, fired.current, datedFromNow)
        })
        #expect(r.fired == 200)
        #expect(r.early == 0)
        #expect(r.datedFromNow)
    }
}

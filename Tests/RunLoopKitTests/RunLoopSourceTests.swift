// Guarantees §3.15: RunLoopSource (Source0).

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.15 RunLoopSource")
struct RunLoopSourceTests {

    @Test("§3.15 schedule runs when added to a loop mode, cancel when removed")
    func scheduleAndCancelCalloutsRun() throws {
        let r = try #require(onLoopThread { loop -> ([String], [Bool]) in
            let log = Recorder<String>()
            let loops = Recorder<Bool>()
            let source = RunLoopSource(
                schedule: { l, m in log.append("schedule:\(m.rawValue)"); loops.append(l === loop) },
                cancel: { l, m in log.append("cancel:\(m.rawValue)"); loops.append(l === loop) },
                perform: {})
            loop.add(source, forMode: "A")
            loop.add(source, forMode: "B")
            loop.remove(source, forMode: "A")
            loop.remove(source, forMode: "B")
            return (log.values, loops.values)
        })
        #expect(r.0 == ["schedule:A", "schedule:B", "cancel:A", "cancel:B"])
        #expect(r.1.count == 4 && r.1.allSatisfy { $0 }, "callouts did not receive the loop")
    }

    @Test("§3.15 invalidate() removes the source from every loop and mode; cancel runs for each")
    func invalidateRemovesFromEveryLoopAndMode() throws {
        let cancels = Recorder<String>()
        let source = RunLoopSource(cancel: { _, m in cancels.append(m.rawValue) }, perform: {})
        let added = Flag(), release = Flag()
        let other = LoopThread { loop -> Bool in  // stays alive until the end of the test
            loop.add(source, forMode: "elsewhere")
            added.set()
            return waitUntil(timeout: .seconds(60)) { release.isSet }
        }
        defer { release.set(); _ = other.join() }
        #expect(waitUntil { added.isSet })
        let r = try #require(onLoopThread { loop -> (Bool, RLResult, RLResult) in
            loop.add(source, forMode: "A")
            loop.add(source, forMode: "B")
            source.invalidate()
            let a = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: false)
            let b = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: false)
            return (source.isValid, a, b)
        })
        #expect(r.0 == false)
        #expect(r.1 == .finished)
        #expect(r.2 == .finished)
        #expect(cancels.values.sorted() == ["A", "B", "elsewhere"])
    }

    @Test("§3.15 signal() does not wake a sleeping loop; wakeUp() does (CF's two-step)")
    func signalAloneLeavesSleepingLoopAsleepUntilWakeUp() throws {
        let performed = Counter()
        let source = RunLoopSource { performed.increment() }
        let lt = LoopThread { loop -> RLResult in
            loop.add(source, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(lt.waitUntilSleeping(in: .default))
        source.signal()
        settle()  // a signal() that wakes would run the source now
        #expect(performed.current == 0, "signal() alone woke the loop")
        #expect(lt.loop.isWaiting, "signal() alone woke the loop")
        #expect(source.isSignalled)
        lt.loop.wakeUp()
        #expect(lt.join() == .handledSource)
        #expect(performed.current == 1)
        #expect(!source.isSignalled)
    }

    @Test("§3.15 a signalled source performs once, however often it was signalled")
    func signalledSourcePerformsOnceHoweverOftenSignalled() throws {
        let r = try #require(onLoopThread { loop -> (Int, RLResult) in
            let performed = Counter()
            let source = RunLoopSource { performed.increment() }
            loop.add(source, forMode: .default)
            for _ in 0..<5 { source.signal() }
            // The run goes on for a while; an uncleared signal would perform again and again.
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(150)) { _ in loop.stop() }, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (performed.current, result)
        })
        #expect(r.0 == 1)
        #expect(r.1 == .stopped)
    }

    @Test("§3.15 signals from another thread, each followed by wakeUp(), are each handled (none lost)")
    func signalPlusWakeUpFromAnotherThread() throws {
        let performed = Counter()
        let source = RunLoopSource { performed.increment() }
        let lt = LoopThread { loop -> RLResult in
            loop.add(source, forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        for i in 1...20 {
            guard lt.waitUntilSleeping() else {
                Issue.record("the loop is not sleeping before signal \(i)")
                break
            }
            source.signal()
            lt.loop.wakeUp()
            guard waitUntil({ performed.current == i }) else {
                Issue.record("signal \(i) was not handled")
                break
            }
        }
        lt.loop.stop()
        #expect(lt.join(timeout: .seconds(10)) == .stopped)
        #expect(performed.current == 20)
    }

    @Test("§3.15 order is kept; isValid true until invalidated")
    func orderAndValidity() {
        let s = RunLoopSource(order: 42) {}
        #expect(s.order == 42)
        #expect(s.isValid)
        #expect(!s.isSignalled)
        s.invalidate()
        #expect(!s.isValid)
        #expect(RunLoopSource {}.order == 0)
    }

    @Test("§3.15 perform runs on the loop's thread even when signalled from another thread")
    func performRunsOnLoopThread() throws {
        let ranOn = Recorder<Bool>()
        let sourceRef = Ref<RunLoopSource>()
        let lt = LoopThread { loop -> RLResult in
            let me = pthread_self()
            let s = RunLoopSource { ranOn.append(isCurrentThread(me)) }
            sourceRef.value = s
            loop.add(s, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(lt.waitUntilSleeping())
        sourceRef.value!.signal()
        lt.loop.wakeUp()
        #expect(lt.join() == .handledSource)
        #expect(ranOn.values == [true])
    }
}

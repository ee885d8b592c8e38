// Guarantees §3.14: perform(inModes:).

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.14 perform(inModes:)")
struct PerformTests {

    @Test("§3.14 perform wakes a sleeping loop by itself; the block runs on the loop thread")
    func performWakesSleepingLoop() throws {
        let ranOnLoop = Flag()
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(lt.waitUntilSleeping(in: .default))
        let thread = lt.threadID
        lt.loop.perform { if isCurrentThread(thread) { ranOnLoop.set() } }  // no wakeUp()
        #expect(lt.join() == .handledSource)
        #expect(ranOnLoop.isSet)
    }

    @Test("§3.14 blocks run in FIFO order")
    func performBlocksRunInFIFOOrder() throws {
        let order = Recorder<Int>()
        let lt = LoopThread(gated: true) { loop -> RLResult in
            loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        for i in 0..<200 { lt.loop.perform { order.append(i) } }  // from another thread, before the run
        lt.go()
        #expect(lt.join() == .finished)
        #expect(order.values == Array(0..<200))
    }

    @Test("§3.14 blocks sent while the loop runs are run in FIFO order too")
    func performBlocksWhileRunningInFIFOOrder() throws {
        let order = Recorder<Int>()
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping())
        for i in 0..<1000 { lt.loop.perform { order.append(i) } }
        lt.loop.perform { lt.loop.stop() }
        #expect(lt.join() == .stopped)
        #expect(order.values == Array(0..<1000))
    }

    @Test("§3.14 a block runs only while the loop runs one of its modes")
    func performRunsOnlyInGivenModes() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int, RLResult, Int, RLResult, Int) in
            let inA = Counter()
            loop.perform(inModes: ["A"]) { inA.increment() }
            let defaultRun = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            let afterDefault = inA.current
            let bRun = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: true)
            let afterB = inA.current
            let aRun = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: true)
            return (defaultRun, afterDefault, bRun, afterB, aRun, inA.current)
        })
        #expect(r.0 == .finished, "a block for mode A kept the default mode alive")
        #expect(r.1 == 0)
        #expect(r.2 == .finished)
        #expect(r.3 == 0)
        #expect(r.4 == .handledSource)
        #expect(r.5 == 1)
    }

    @Test("§3.14 a block for several modes runs once, in the first of them that runs")
    func blockForSeveralModesRunsOnce() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, RLResult, Int) in
            let count = Counter()
            loop.perform(inModes: ["X", "Y"]) { count.increment() }
            let y = loop.run(mode: "Y", for: longRun, returnAfterSourceHandled: true)
            let x = loop.run(mode: "X", for: longRun, returnAfterSourceHandled: true)
            return (y, x, count.current)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1 == .finished)
        #expect(r.2 == 1)
    }

    @Test("§3.14 the default modes argument is [.default]")
    func defaultModesArgumentIsDefault() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, RLResult, Int) in
            let count = Counter()
            loop.perform { count.increment() }
            let other = loop.run(mode: "other", for: longRun, returnAfterSourceHandled: true)
            let def = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (other, def, count.current)
        })
        #expect(r.0 == .finished)
        #expect(r.1 == .handledSource)
        #expect(r.2 == 1)
    }

    @Test("§3.14 a block for .common runs in any common mode (including one made common later), not in others")
    func performInCommonRunsInAnyCommonMode() throws {
        let r = try #require(onLoopThread { loop -> [String] in
            let log = Recorder<String>()
            loop.perform(inModes: [.common]) { log.append("first:\(loop.currentMode!.rawValue)") }
            log.append("plain:\(loop.run(mode: "plain", for: longRun, returnAfterSourceHandled: true))")
            loop.addCommonMode("madeCommon")
            log.append("madeCommon:\(loop.run(mode: "madeCommon", for: longRun, returnAfterSourceHandled: true))")
            loop.perform(inModes: [.common]) { log.append("second:\(loop.currentMode!.rawValue)") }
            log.append("default:\(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            return log.values
        })
        #expect(r == ["plain:finished",
                      "first:madeCommon", "madeCommon:handledSource",
                      "second:\(RLMode.default.rawValue)", "default:handledSource"])
    }

    @Test("§3.14 a block for .common runs in a mode that had items and was run before it was made common")
    func performInCommonRunsInModeMadeCommonAfterUse() throws {
        let r = try #require(onLoopThread { loop -> [String] in
            let log = Recorder<String>()
            let mode: RLMode = "usedFirst"
            let keepAlive = keepAliveSource()
            loop.add(keepAlive, forMode: mode)
            loop.perform(inModes: [.common]) { log.append("ran:\(loop.currentMode!.rawValue)") }
            log.append("before:\(loop.run(mode: mode, for: .milliseconds(1), returnAfterSourceHandled: true))")
            loop.addCommonMode(mode)
            log.append("after:\(loop.run(mode: mode, for: longRun, returnAfterSourceHandled: true))")
            keepAlive.invalidate()
            return log.values
        })
        #expect(r == ["before:timedOut", "ran:usedFirst", "after:handledSource"])
    }

    @Test("§3.14 blocks from several threads keep each thread's order")
    func performFromSeveralThreadsKeepsPerThreadOrder() throws {
        let seen = Recorder<(Int, Int)>()
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        let senders = 3, perSender = 500
        let doneSending = Counter()
        for s in 0..<senders {
            startThread {
                for i in 0..<perSender { lt.loop.perform { seen.append((s, i)) } }
                doneSending.increment()
            }
        }
        #expect(waitUntil { doneSending.current == senders })
        #expect(waitUntil { seen.count == senders * perSender })
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        for s in 0..<senders {
            #expect(seen.values.filter { $0.0 == s }.map(\.1) == Array(0..<perSender))
        }
    }
}

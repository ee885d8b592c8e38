// Guarantees §3.5–3.8: run()/run(until:), stop(), nested runs, the common pseudo-mode.

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.5–3.8 stop, nesting, common pseudo-mode")
struct RunLoopStopAndNestingTests {

    // MARK: §3.5

    @Test("§3.5 run() returns on stop() (unlike NSRunLoop.run)")
    func runReturnsOnStop() throws {
        let lt = LoopThread { loop -> Bool in
            loop.add(keepAliveSource(), forMode: .default)
            loop.run()
            return true
        }
        #expect(lt.waitUntilSleeping(in: .default))
        lt.loop.stop()
        #expect(lt.join(timeout: .seconds(30)) == true, "run() did not return after stop()")
    }

    @Test("§3.5 run(until:) returns on stop()")
    func runUntilReturnsOnStop() throws {
        let lt = LoopThread { loop -> Bool in
            loop.add(keepAliveSource(), forMode: .default)
            loop.run(until: .now + .seconds(120))
            return true
        }
        #expect(lt.waitUntilSleeping(in: .default))
        lt.loop.stop()
        #expect(lt.join(timeout: .seconds(30)) == true, "run(until:) did not return after stop()")
    }

    @Test("§3.5 run() returns when the default mode is (or becomes) empty")
    func runReturnsWhenDefaultModeIsEmpty() throws {
        let r = try #require(onLoopThread { loop -> Int in
            loop.run()  // empty: returns at once
            let fires = Counter()
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(20)) { _ in fires.increment() }, forMode: .default)
            loop.run()  // returns once the one-shot timer fired and the mode is empty
            return fires.current
        })
        #expect(r == 1)
    }

    @Test("§3.5 run(until:) returns at its deadline")
    func runUntilReturnsAtDeadline() throws {
        let r = onLoopThread { loop -> Bool in
            loop.add(keepAliveSource(), forMode: .default)
            let deadline = ContinuousClock.now + .milliseconds(100)
            loop.run(until: deadline)
            return ContinuousClock.now >= deadline
        }
        #expect(r == true, "run(until:) returned before its deadline")
    }

    @Test("§3.5 run() runs the default mode only")
    func runRunsDefaultMode() throws {
        let r = try #require(onLoopThread { loop -> ([RLMode?], Int) in
            let modes = Recorder<RLMode?>()
            let other = Counter()
            loop.perform(inModes: ["elsewhere"]) { other.increment() }
            loop.perform { modes.append(loop.currentMode) }
            loop.run()
            return (modes.values, other.current)
        })
        #expect(r.0 == [.default])
        #expect(r.1 == 0)
    }

    // MARK: §3.6

    @Test("§3.6 stop() from another thread makes a sleeping run return .stopped")
    func stopFromAnotherThreadReturnsStopped() throws {
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(in: .default))
        lt.loop.stop()
        #expect(lt.join() == .stopped)
    }

    @Test("§3.6 a stop() sent before the run is kept: the next invocation returns .stopped at once")
    func stopBeforeRunIsNotLost() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, RLResult) in
            loop.add(keepAliveSource(), forMode: .default)
            loop.stop()
            let first = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            // Consumed: the next invocation runs normally.
            loop.perform {}
            let second = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (first, second)
        })
        #expect(r.0 == .stopped)
        #expect(r.1 == .handledSource, "the pending stop was not consumed by the first invocation")
    }

    @Test("§3.6 a stop() sent from another thread while the loop is not running is not lost")
    func stopFromAnotherThreadBeforeRunIsNotLost() throws {
        let lt = LoopThread(gated: true) { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: "later")
            return loop.run(mode: "later", for: longRun, returnAfterSourceHandled: false)
        }
        lt.loop.stop()  // the loop thread has not started running yet
        lt.go()
        #expect(lt.join() == .stopped)
    }

    @Test("§3.6 a pending stop makes run(until:) return at once")
    func pendingStopEndsRunUntil() throws {
        let r = onLoopThread { loop -> Bool in
            loop.add(keepAliveSource(), forMode: .default)
            loop.stop()
            loop.run(until: .now + .seconds(120))
            return true
        }
        #expect(r == true)
    }

    // MARK: §3.7

    @Test("§3.7 nested run in another mode works; currentMode is the innermost mode, restored afterwards")
    func nestedRunInAnotherModeAndCurrentModeIsInnermost() throws {
        let r = try #require(onLoopThread { loop -> ([String], RLResult, RLMode?) in
            let log = Recorder<String>()
            let inner: RLMode = "inner"
            let outerSource = RunLoopSource {
                log.append("outer:\(loop.currentMode?.rawValue ?? "nil")")
                loop.perform(inModes: [inner]) { log.append("inner:\(loop.currentMode?.rawValue ?? "nil")") }
                let r = loop.run(mode: inner, for: longRun, returnAfterSourceHandled: true)
                log.append("nested:\(r)")
                log.append("back:\(loop.currentMode?.rawValue ?? "nil")")
            }
            loop.add(outerSource, forMode: "outer")
            outerSource.signal()
            let result = loop.run(mode: "outer", for: longRun, returnAfterSourceHandled: true)
            return (log.values, result, loop.currentMode)
        })
        #expect(r.0 == ["outer:outer", "inner:inner", "nested:handledSource", "back:outer"])
        #expect(r.1 == .handledSource)
        #expect(r.2 == nil)
    }

    @Test("§3.7 nested run in the same mode works")
    func nestedRunInSameMode() throws {
        let r = try #require(onLoopThread { loop -> ([String], RLResult) in
            let log = Recorder<String>()
            loop.perform {
                log.append("outer block")
                loop.perform { log.append("inner block") }
                let nested = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
                log.append("nested:\(nested)")
            }
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (log.values, result)
        })
        #expect(r.0 == ["outer block", "inner block", "nested:handledSource"])
        #expect(r.1 == .handledSource)
    }

    @Test("§3.7 currentMode and isWaiting are readable from another thread, innermost while nested")
    func currentModeSeenFromAnotherThread() throws {
        let lt = LoopThread { loop -> (RLResult, RLResult) in
            loop.add(keepAliveSource(), forMode: "A")
            loop.add(keepAliveSource(), forMode: "B")
            let innerResult = Ref<RLResult>()
            loop.perform(inModes: ["A"]) {
                innerResult.value = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: false)
            }
            let outer = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: false)
            return (innerResult.value ?? .finished, outer)
        }
        // Nested in B: stop() ends the innermost invocation only.
        #expect(lt.waitUntilSleeping(in: "B"), "never saw currentMode == B while waiting")
        lt.loop.stop()
        // Back in A, still running.
        #expect(lt.waitUntilSleeping(in: "A"), "never saw currentMode == A after the nested run")
        #expect(!lt.isFinished)
        lt.loop.stop()
        let r = try #require(lt.join())
        #expect(r.0 == .stopped)
        #expect(r.1 == .stopped)
        #expect(lt.loop.currentMode == nil)
        #expect(lt.loop.isWaiting == false)
    }

    @Test("§3.6/§3.7 stop() inside a nested run's callout stops only the innermost invocation")
    func stopInsideNestedCalloutStopsInnermost() throws {
        let r = try #require(onLoopThread { loop -> ([String], RLResult) in
            let log = Recorder<String>()
            loop.perform(inModes: ["outer"]) {
                loop.perform(inModes: ["inner"]) { loop.stop() }
                loop.add(keepAliveSource(), forMode: "inner")
                log.append("nested:\(loop.run(mode: "inner", for: longRun, returnAfterSourceHandled: false))")
                loop.perform(inModes: ["outer"]) {
                    log.append("outer still running")
                    loop.stop()
                }
            }
            loop.add(keepAliveSource(), forMode: "outer")
            let result = loop.run(mode: "outer", for: longRun, returnAfterSourceHandled: false)
            return (log.values, result)
        })
        // The stop ended only the nested run; the outer one went on and ran the next block.
        #expect(r.0 == ["nested:stopped", "outer still running"])
        #expect(r.1 == .stopped)
    }

    // MARK: §3.8

    @Test("§3.8 run(mode: .common) returns .finished at once: the common pseudo-mode is a set, not a mode")
    func runningCommonPseudoModeReturnsFinished() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Bool, RLResult, Int) in
            let performed = Counter()
            let s = RunLoopSource { performed.increment() }
            loop.add(s, forMode: .common)
            loop.add(farFutureTimer(), forMode: .common)
            loop.perform(inModes: [.common]) { performed.increment() }
            s.signal()
            let a = loop.run(mode: .common, for: longRun, returnAfterSourceHandled: false)
            let b = loop.run(mode: .common, before: .now + longRun)
            let c = loop.run(mode: .common, for: longRun, returnAfterSourceHandled: true)
            return (a, b, c, performed.current)
        })
        #expect(r.0 == .finished)
        #expect(r.1 == false)
        #expect(r.2 == .finished)
        #expect(r.3 == 0)
    }
}

// The run-loop surface, and Guarantees §3.1–3.4 (run-loop iteration).

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§2 ThreadRunLoop surface")
struct ThreadRunLoopSurfaceTests {
    @Test("§2 current is created on first use, one per thread")
    func currentIsOnePerThread() throws {
        let a = onFreshThread { () -> Bool in
            ThreadRunLoop.current === ThreadRunLoop.current
        }
        #expect(a == true)
        let loopA = try #require(onFreshThread { ThreadRunLoop.current })
        let loopB = try #require(onFreshThread { ThreadRunLoop.current })
        #expect(loopA !== loopB)
        #expect(!loopA.debugDescription.isEmpty)
    }

    @Test("§2 main is one loop, and not a worker thread's loop")
    func mainIsStable() throws {
        let fromWorker = onFreshThread { () -> Bool in
            ThreadRunLoop.main === ThreadRunLoop.main && ThreadRunLoop.main !== ThreadRunLoop.current
        }
        #expect(fromWorker == true)
    }

    @Test("§2 Mode: rawValue, init(_:), string literal agree; default and common differ")
    func modeInitialisersAgree() {
        let a = RLMode("custom")
        let b = RLMode(rawValue: "custom")
        let c: RLMode = "custom"
        #expect(a == b && b == c)
        #expect(a.rawValue == "custom")
        #expect(RLMode.default != RLMode.common)
        #expect(Set([a, b, c]).count == 1)
    }

    @Test("§2 Activity's raw values are CF's, allActivities included (kCFRunLoopAllActivities, 0x0FFFFFFF)")
    func activityValuesAreCFs() {
        #expect(RLActivity.allActivities.rawValue == 0x0FFF_FFFF)
        let values: [(RLActivity, UInt32)] = [(.entry, 1), (.beforeTimers, 2), (.beforeSources, 4),
                                              (.beforeWaiting, 32), (.afterWaiting, 64), (.exit, 128)]
        for (activity, cf) in values { #expect(activity.rawValue == cf) }
    }

    @Test("§2 Activity.allActivities contains the six activities")
    func allActivitiesContainsEverything() {
        let all = RLActivity.allActivities
        for a: RLActivity in [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit] {
            #expect(all.contains(a))
        }
        #expect(RLActivity.entry != RLActivity.exit)
    }

    @Test("§2 the default mode is a common mode from the start")
    func defaultModeIsCommonFromTheStart() throws {
        let modes = try #require(onFreshThread { ThreadRunLoop.current.commonModes })
        #expect(modes.contains(.default))
    }

    @Test("§2 currentMode is nil and isWaiting false when the loop is not running")
    func idleLoopHasNoCurrentMode() throws {
        let lt = LoopThread { loop in (loop.currentMode, loop.isWaiting) }
        let r = try #require(lt.join())
        #expect(r.0 == nil)
        #expect(r.1 == false)
        #expect(lt.loop.currentMode == nil)
    }
}

@Suite("§3.1–3.4 run-loop iteration")
struct RunLoopIterationTests {

    // MARK: §3.1

    @Test("§3.1 an empty mode returns .finished at once, with no observer callouts")
    func emptyModeReturnsFinishedWithNoObserverCallouts() throws {
        let r = try #require(onLoopThread { loop -> ([RLResult], [String]) in
            let events = Recorder<String>()
            let untouched = loop.run(mode: "never-used", for: longRun, returnAfterSourceHandled: false)
            loop.add(recordingObserver(events), forMode: .default)
            let withObserver = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            let withObserverRASH = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return ([untouched, withObserver, withObserverRASH], events.values)
        })
        #expect(r.0 == [.finished, .finished, .finished])
        #expect(r.1 == [], "observer callouts for an empty mode")
    }

    @Test("§3.1 observers alone do not keep a mode alive")
    func observersAloneDoNotKeepModeAlive() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Bool, Int) in
            let mode: RLMode = "observed-only"
            let events = Recorder<String>()
            loop.add(recordingObserver(events), forMode: mode)
            loop.add(recordingObserver(events, order: 1), forMode: mode)
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            let before = loop.run(mode: mode, before: .now + longRun)
            return (result, before, events.count)
        })
        #expect(r.0 == .finished)
        #expect(r.1 == false)
        #expect(r.2 == 0)
    }

    @Test("§3.1 a pending perform block keeps the mode alive (it runs), then the empty mode finishes")
    func pendingPerformBlockKeepsModeAlive() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Bool, [String]) in
            let ran = Flag()
            let events = Recorder<String>()
            loop.add(recordingObserver(events), forMode: .default)
            loop.perform { ran.set() }
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (result, ran.isSet, events.values)
        })
        #expect(r.1, "the pending block did not run: the mode was treated as empty")
        #expect(r.0 == .finished)
        // §3.2: a pass in which a block ran only polls: no beforeWaiting/afterWaiting.
        #expect(r.2 == ["entry", "beforeTimers", "beforeSources", "exit"])
    }

    // MARK: §3.2

    @Test("§3.2 observers see entry → beforeTimers → beforeSources → beforeWaiting → afterWaiting → … → exit")
    func observersSeeActivitiesInIterationOrder() throws {
        let events = try #require(onLoopThread { loop -> [String] in
            let mode: RLMode = "iteration"
            let events = Recorder<String>()
            loop.add(recordingObserver(events), forMode: mode)
            // The only item: a one-shot timer. It wakes the loop once, fires, and the
            // now-empty mode finishes the run.
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(100)) { _ in events.append("timer") },
                     forMode: mode)
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            events.append("result:\(result)")
            return events.values
        })
        #expect(events.first == "entry")
        #expect(events.last == "result:finished")
        // entry, then k ≥ 1 passes of [beforeTimers, beforeSources, beforeWaiting, afterWaiting]
        // (an early wake-up may add passes), then the timer, then exit.
        let body = Array(events.dropFirst().dropLast(3))
        let pass = ["beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting"]
        #expect(!body.isEmpty && body.count % 4 == 0)
        for i in stride(from: 0, to: body.count - body.count % 4, by: 4) {
            #expect(Array(body[i..<i + 4]) == pass, "pass \(i / 4): \(events)")
        }
        #expect(Array(events.suffix(3)) == ["timer", "exit", "result:finished"])
        #expect(events.filter { $0 == "entry" }.count == 1)
        #expect(events.filter { $0 == "exit" }.count == 1)
    }

    @Test("§3.2 .entry and .exit once per invocation, however many passes")
    func entryAndExitOncePerInvocation() throws {
        let events = try #require(onLoopThread { loop -> [String] in
            let events = Recorder<String>()
            loop.add(recordingObserver(events, activities: [.entry, .exit, .afterWaiting]), forMode: .default)
            let fires = Counter()
            let timer = RunLoopTimer(fireAt: .now + .milliseconds(5), interval: .milliseconds(5)) { t in
                if fires.increment() == 5 { t.invalidate() }
            }
            loop.add(timer, forMode: .default)
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return events.values
        })
        #expect(events.filter { $0 == "afterWaiting" }.count >= 5, "\(events)")
        #expect(events.filter { $0 == "entry" }.count == 1)
        #expect(events.filter { $0 == "exit" }.count == 1)
        #expect(events.first == "entry" && events.last == "exit")
    }

    @Test("§3.2 signalled Source0s perform in ascending order")
    func signalledSource0sPerformInAscendingOrder() throws {
        let r = try #require(onLoopThread { loop -> ([Int], RLResult) in
            let mode: RLMode = "ordered"
            let performed = Recorder<Int>()
            let sources = [7, -3, 2, 0, 11, -1].map { order in
                RunLoopSource(order: order) {
                    performed.append(order)
                    if performed.count == 6 { loop.stop() }
                }
            }
            for s in sources { loop.add(s, forMode: mode) }
            for s in sources.reversed() { s.signal() }
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            return (performed.values, result)
        })
        #expect(r.0 == [-3, -1, 0, 2, 7, 11])
        #expect(r.1 == .stopped)
    }

    @Test("§3.2 a signalled source performs once and its signal is cleared before perform runs")
    func signalledSourcePerformsOnceAndSignalIsClearedBeforePerform() throws {
        let r = try #require(onLoopThread { loop -> (Int, [Bool], Bool, RLResult) in
            let mode: RLMode = "clear"
            let count = Counter()
            let seen = Recorder<Bool>()
            let sourceRef = WeakRef<RunLoopSource>()
            let source = RunLoopSource {
                count.increment()
                seen.append(sourceRef.object!.isSignalled)
            }
            sourceRef.object = source
            loop.add(source, forMode: mode)
            // Something to end the run after a few more passes.
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(200)) { _ in loop.stop() }, forMode: mode)
            source.signal()
            let signalledBefore = source.isSignalled
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            return (count.current, seen.values, signalledBefore, result)
        })
        #expect(r.2, "isSignalled was false right after signal()")
        #expect(r.0 == 1, "performed \(r.0) times")
        #expect(r.1 == [false], "perform saw isSignalled == \(r.1)")
        #expect(r.3 == .stopped)
    }

    @Test("§3.2 a signal raised during perform (after clearing) performs again in a later pass")
    func signalRaisedDuringPerformIsNotLost() throws {
        let r = try #require(onLoopThread { loop -> (Int, RLResult) in
            let count = Counter()
            let sourceRef = WeakRef<RunLoopSource>()
            let source = RunLoopSource {
                if count.increment() == 1 { sourceRef.object!.signal() } else { loop.stop() }
            }
            sourceRef.object = source
            loop.add(source, forMode: .default)
            source.signal()
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (count.current, result)
        })
        #expect(r.0 == 2)
        #expect(r.1 == .stopped)
    }

    @Test("§3.2 a message already queued before the run is handled without .beforeWaiting")
    func queuedMessageIsHandledWithoutBeforeWaiting() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, [String]) in
            let mode: RLMode = "ready-port"
            let events = Recorder<String>()
            let port = try! MessagePort()
            port.setHandler { m in events.append("message \(m.msgid)") }
            loop.add(port, forMode: mode)
            loop.add(recordingObserver(events), forMode: mode)
            try! port.send(msgid: 42, timeout: .seconds(5))
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: true)
            return (result, events.values)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1.contains("message 42"))
        #expect(!r.1.contains("beforeWaiting"), "\(r.1)")
        #expect(!r.1.contains("afterWaiting"), "\(r.1)")
        #expect(r.1.first == "entry" && r.1.last == "exit")
    }

    @Test("§3.2 an fd already readable before the run is handled without .beforeWaiting")
    func readyDescriptorIsHandledWithoutBeforeWaiting() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let r = try #require(onLoopThread { loop -> (RLResult, [String]) in
            let mode: RLMode = "ready-fd"
            let events = Recorder<String>()
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, ev in
                if ev.contains(.readable) { events.append("readable \(drainEventFD(fd))") }
            }
            loop.add(source, forMode: mode)
            loop.add(recordingObserver(events), forMode: mode)
            writeEventFD(fd, 3)
            let result = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: true)
            source.invalidate()
            return (result, events.values)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1.contains("readable 3"))
        #expect(!r.1.contains("beforeWaiting"), "\(r.1)")
        #expect(!r.1.contains("afterWaiting"), "\(r.1)")
    }

    @Test("§3.2 a pass in which a Source0 ran only polls: no .beforeWaiting/.afterWaiting in it")
    func passWithSource0DoesNotEmitBeforeOrAfterWaiting() throws {
        let events = try #require(onLoopThread { loop -> [String] in
            let mode: RLMode = "poll-pass"
            let events = Recorder<String>()
            let source = RunLoopSource { events.append("source") }
            loop.add(source, forMode: mode)
            loop.add(recordingObserver(events), forMode: mode)
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(500)) { _ in
                events.append("timer")
                loop.stop()
            }, forMode: mode)
            source.signal()
            _ = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            return events.values
        })
        // Pass 1: entry, beforeTimers, beforeSources, source, (poll only);
        // pass 2 starts straight away with beforeTimers.
        #expect(Array(events.prefix(5)) == ["entry", "beforeTimers", "beforeSources", "source", "beforeTimers"],
                "\(events)")
        // Later the loop does sleep (nothing signalled), the timer wakes it and stops it.
        #expect(Array(events.suffix(4)) == ["beforeWaiting", "afterWaiting", "timer", "exit"], "\(events)")
    }

    // MARK: §3.3

    @Test("§3.3 returnAfterSourceHandled returns .handledSource after the first Source0 perform")
    func returnAfterSourceHandledAfterSource0() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int) in
            let count = Counter()
            let source = RunLoopSource { count.increment() }
            loop.add(source, forMode: .default)
            source.signal()
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (result, count.current)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1 == 1)
    }

    @Test("§3.3 without returnAfterSourceHandled, handling a source does not end the run")
    func withoutReturnAfterSourceHandledTheRunGoesOn() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int, Int) in
            let count = Counter()
            let fires = Counter()
            let source = RunLoopSource { count.increment() }
            loop.add(source, forMode: .default)
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(100)) { _ in
                fires.increment()
                loop.stop()
            }, forMode: .default)
            source.signal()
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (result, count.current, fires.current)
        })
        #expect(r.1 == 1)
        #expect(r.2 == 1, "the run ended before the timer fired")
        #expect(r.0 == .stopped)
    }

    @Test("§3.3 returnAfterSourceHandled returns after exactly one port message")
    func returnAfterSourceHandledAfterOnePortMessage() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, [UInt32], Int, RLResult, [UInt32]) in
            let got = Recorder<UInt32>()
            let port = try! MessagePort()
            port.setHandler { got.append($0.msgid) }
            loop.add(port, forMode: .default)
            for id: UInt32 in 1...3 { try! port.send(msgid: id, timeout: .seconds(5)) }
            let first = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            let afterFirst = got.values
            let queued = port.queuedCount
            let second = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            port.invalidate()
            return (first, afterFirst, queued, second, got.values)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1 == [1])
        #expect(r.2 == 2)
        #expect(r.3 == .handledSource)
        #expect(r.4 == [1, 2])
    }

    @Test("§3.3 returnAfterSourceHandled returns after an fd event that woke the sleeping loop")
    func returnAfterSourceHandledAfterFdEvent() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let handled = Recorder<UInt64>()
        let lt = LoopThread { loop -> RLResult in
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
                handled.append(drainEventFD(fd))
            }
            loop.add(source, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            source.invalidate()
            return result
        }
        #expect(lt.waitUntilSleeping())
        writeEventFD(fd, 5)
        let result = try #require(lt.join())
        #expect(result == .handledSource)
        #expect(handled.values == [5])
    }

    @Test("§3.3 returnAfterSourceHandled returns after a perform block that woke the loop")
    func returnAfterSourceHandledAfterPerformBlock() throws {
        let ranOnLoopThread = Flag()
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: "blocks")
            return loop.run(mode: "blocks", for: longRun, returnAfterSourceHandled: true)
        }
        #expect(lt.waitUntilSleeping(in: "blocks"))
        let threadID = lt.threadID
        lt.loop.perform(inModes: ["blocks"]) { if isCurrentThread(threadID) { ranOnLoopThread.set() } }
        let result = try #require(lt.join())
        #expect(result == .handledSource)
        #expect(ranOnLoopThread.isSet)
    }

    @Test("§3.3 a timer firing never makes run(mode:before:) return")
    func timerFiringDoesNotMakeRunModeBeforeReturn() throws {
        let r = try #require(onLoopThread { loop -> (Bool, Int, Int) in
            let mode: RLMode = "timers-dont-count"
            let fires = Counter()
            let sourcePerformed = Counter()
            let source = RunLoopSource { sourcePerformed.increment() }
            loop.add(source, forMode: mode)
            // Fires three times; only on the third does it make a Source0 pending.
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(10), interval: .milliseconds(10)) { t in
                if fires.increment() == 3 {
                    t.invalidate()
                    source.signal()
                    loop.wakeUp()
                }
            }, forMode: mode)
            let returned = loop.run(mode: mode, before: .now + longRun)
            return (returned, fires.current, sourcePerformed.current)
        })
        #expect(r.0 == true)
        #expect(r.1 == 3)
        #expect(r.2 == 1, "run(mode:before:) returned before the source was handled: a timer counted as a source")
    }

    @Test("§3.3 a timer firing does not make run(mode:for:returnAfterSourceHandled: true) return")
    func timerFiringDoesNotCountAsHandledSource() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int) in
            let fires = Counter()
            loop.add(keepAliveSource(), forMode: .default)
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(10), interval: .milliseconds(10)) { _ in
                if fires.increment() == 3 { loop.stop() }
            }, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (result, fires.current)
        })
        #expect(r.0 == .stopped)
        #expect(r.1 == 3)
    }

    // MARK: §3.4

    @Test("§3.4 run(mode:before:) returns false only when the mode is empty")
    func runModeBeforeReturnsFalseOnlyWhenEmpty() throws {
        let r = try #require(onLoopThread { loop -> [String: Bool] in
            var out: [String: Bool] = [:]
            out["empty"] = loop.run(mode: "m", before: .now + longRun)
            loop.perform(inModes: ["m"]) {}
            out["block"] = loop.run(mode: "m", before: .now + longRun)
            loop.add(keepAliveSource(), forMode: "m")
            out["timedOut"] = loop.run(mode: "m", before: .now + .milliseconds(50))
            loop.stop()
            out["stopped"] = loop.run(mode: "m", before: .now + longRun)
            let s = RunLoopSource {}
            loop.add(s, forMode: "m")
            s.signal()
            out["source"] = loop.run(mode: "m", before: .now + longRun)
            return out
        })
        #expect(r["empty"] == false)
        #expect(r["block"] == true)
        #expect(r["timedOut"] == true)
        #expect(r["stopped"] == true)
        #expect(r["source"] == true)
    }

    @Test("§3.4 run(mode:before:) returns after one handled source, like returnAfterSourceHandled: true")
    func runModeBeforeReturnsAfterOneSource() throws {
        let r = try #require(onLoopThread { loop -> (Bool, [UInt32]) in
            let got = Recorder<UInt32>()
            let port = try! MessagePort()
            port.setHandler { got.append($0.msgid) }
            loop.add(port, forMode: .default)
            try! port.send(msgid: 1, timeout: .seconds(5))
            try! port.send(msgid: 2, timeout: .seconds(5))
            let returned = loop.run(mode: .default, before: .now + longRun)
            port.invalidate()
            return (returned, got.values)
        })
        #expect(r.0 == true)
        #expect(r.1 == [1])
    }
}

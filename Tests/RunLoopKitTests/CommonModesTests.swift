// Guarantees §3.9 (common modes, adding twice, removal wakes a sleeping loop)
// and §3.10 (only items of the running mode are serviced).

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.9–3.10 common modes and mode isolation")
struct CommonModesTests {

    // MARK: §3.9

    @Test("§3.9 an item added to .common is in every common mode, and in no other")
    func itemInCommonIsInEveryCommonMode() throws {
        let r = try #require(onLoopThread { loop -> [String: RLResult] in
            loop.addCommonMode("A")
            let source = RunLoopSource {}
            loop.add(source, forMode: .common)
            var out: [String: RLResult] = [:]
            source.signal()
            out["A"] = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: true)
            source.signal()
            out["default"] = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            out["notCommon"] = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: true)
            return out
        })
        #expect(r["A"] == .handledSource)
        #expect(r["default"] == .handledSource)
        #expect(r["notCommon"] == .finished)
    }

    @Test("§3.9 addCommonMode adds to commonModes")
    func addCommonModeIsVisible() throws {
        let lt = LoopThread { loop -> Set<RLMode> in
            loop.addCommonMode("extra")
            return loop.commonModes
        }
        let modes = try #require(lt.join())
        #expect(modes.contains("extra"))
        #expect(modes.contains(.default))
        // Readable from any thread.
        #expect(lt.loop.commonModes == modes)
    }

    @Test("§3.9 .common items appear in modes made common later with addCommonMode")
    func commonItemsAppearInModesMadeCommonLater() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, RLResult, Int) in
            let count = Counter()
            let source = RunLoopSource { count.increment() }
            loop.add(source, forMode: .common)
            let before = loop.run(mode: "late", for: longRun, returnAfterSourceHandled: true)
            loop.addCommonMode("late")
            source.signal()
            let after = loop.run(mode: "late", for: longRun, returnAfterSourceHandled: true)
            return (before, after, count.current)
        })
        #expect(r.0 == .finished, "the mode was not empty before it was made common")
        #expect(r.1 == .handledSource)
        #expect(r.2 == 1)
    }

    @Test("§3.9 adding an item twice to a mode is a no-op: one schedule, one perform, one remove empties the mode")
    func addingTwiceIsANoOp() throws {
        let r = try #require(onLoopThread { loop -> (Int, Int, RLResult, Int, RLResult) in
            let scheduled = Counter()
            let performed = Counter()
            let source = RunLoopSource(schedule: { _, _ in scheduled.increment() },
                                       perform: {
                                           performed.increment()
                                           loop.stop()
                                       })
            let mode: RLMode = "twice"
            loop.add(source, forMode: mode)
            loop.add(source, forMode: mode)
            source.signal()
            let first = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            loop.remove(source, forMode: mode)
            let afterRemove = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
            return (scheduled.current, performed.current, first, performed.current, afterRemove)
        })
        #expect(r.0 == 1, "schedule ran \(r.0) times")
        #expect(r.1 == 1, "performed \(r.1) times")
        #expect(r.2 == .stopped)
        #expect(r.4 == .finished, "one remove did not empty the mode")
    }

    @Test("§3.9 adding a timer, port, fd source or observer twice is a no-op", arguments: ["timer", "port", "fd", "observer"])
    func addingOtherItemsTwiceIsANoOp(kind: String) throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let r = try #require(onLoopThread { loop -> (RLResult, Int) in
            let mode: RLMode = "twice"
            let calls = Counter()
            switch kind {
            case "timer":
                let t = farFutureTimer()
                loop.add(t, forMode: mode); loop.add(t, forMode: mode); loop.remove(t, forMode: mode)
            case "port":
                let p = try! MessagePort()
                loop.add(p, forMode: mode); loop.add(p, forMode: mode); loop.remove(p, forMode: mode)
            case "fd":
                let s = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in }
                loop.add(s, forMode: mode); loop.add(s, forMode: mode); loop.remove(s, forMode: mode)
            case "observer":
                let o = RunLoopObserver(activities: .entry) { _, _ in calls.increment() }
                loop.add(o, forMode: mode); loop.add(o, forMode: mode)
                loop.perform(inModes: [mode]) {}
                let r = loop.run(mode: mode, for: longRun, returnAfterSourceHandled: true)
                return (r, calls.current)
            default:
                break
            }
            return (loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false), 0)
        })
        if kind == "observer" {
            #expect(r.0 == .handledSource)
            #expect(r.1 == 1, "observer added twice was called \(r.1) times for one .entry")
        } else {
            #expect(r.0 == .finished, "one remove after two adds did not empty the mode")
        }
    }

    enum RemovalKind: String, CaseIterable, Sendable {
        case removeSource, invalidateSource, removeTimer, invalidateTimer,
             removePort, invalidatePort, removeFD, invalidateFD
    }

    @Test("§3.9 removing or invalidating the last item from another thread while the loop sleeps → .finished",
          arguments: RemovalKind.allCases)
    func removingLastItemFromAnotherThreadEndsRunWithFinished(kind: RemovalKind) throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let mode: RLMode = "last-item"
        let source = RunLoopSource {}
        let timer = farFutureTimer()
        let port = try MessagePort()
        let fdSource = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in }
        let lt = LoopThread { loop -> RLResult in
            switch kind {
            case .removeSource, .invalidateSource: loop.add(source, forMode: mode)
            case .removeTimer, .invalidateTimer: loop.add(timer, forMode: mode)
            case .removePort, .invalidatePort: loop.add(port, forMode: mode)
            case .removeFD, .invalidateFD: loop.add(fdSource, forMode: mode)
            }
            return loop.run(mode: mode, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(in: mode))
        switch kind {
        case .removeSource: lt.loop.remove(source, forMode: mode)
        case .invalidateSource: source.invalidate()
        case .removeTimer: lt.loop.remove(timer, forMode: mode)
        case .invalidateTimer: timer.invalidate()
        case .removePort: lt.loop.remove(port, forMode: mode)
        case .invalidatePort: port.invalidate()
        case .removeFD: lt.loop.remove(fdSource, forMode: mode)
        case .invalidateFD: fdSource.invalidate()
        }
        let result = lt.join()
        #expect(result == .finished, "\(kind): got \(String(describing: result))")
        fdSource.invalidate()
        port.invalidate()
    }

    @Test("§3.9 removing the last item of a common mode via .common from another thread → .finished")
    func removingLastCommonItemFromAnotherThreadEndsRun() throws {
        let source = RunLoopSource {}
        let lt = LoopThread { loop -> RLResult in
            loop.addCommonMode("C")
            loop.add(source, forMode: .common)
            return loop.run(mode: "C", for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(in: "C"))
        lt.loop.remove(source, forMode: .common)
        #expect(lt.join() == .finished)
    }

    // MARK: §3.10

    @Test("§3.10 an fd source in mode A does not wake a loop sleeping in mode B; handled when A runs")
    func fdSourceInOtherModeDoesNotWakeLoop() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let handled = Recorder<(RLMode?, UInt64)>()
        let events = Recorder<String>()
        let lt = LoopThread { loop -> (RLResult, RLResult) in
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
                handled.append((loop.currentMode, drainEventFD(fd)))
            }
            loop.add(source, forMode: "A")
            loop.add(keepAliveSource(), forMode: "B")
            loop.add(recordingObserver(events, activities: .afterWaiting), forMode: "B")
            let inB = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: false)
            let inA = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: true)
            source.invalidate()
            return (inB, inA)
        }
        #expect(lt.waitUntilSleeping(in: "B"))
        writeEventFD(fd, 9)
        settle()  // a wrong wake-up would show up as an .afterWaiting in B
        #expect(events.count == 0, "the fd of mode A woke the loop sleeping in B")
        #expect(handled.count == 0, "the fd of mode A was serviced in B")
        lt.loop.perform(inModes: ["B"]) { lt.loop.stop() }  // exactly one legitimate wake-up
        let r = try #require(lt.join())
        #expect(r.0 == .stopped)
        #expect(events.count == 1, "afterWaiting in B: \(events.count), expected 1 (the perform)")
        #expect(r.1 == .handledSource)
        let h = handled.values
        #expect(h.count == 1)
        #expect(h.first?.0 == "A")
        #expect(h.first?.1 == 9)
    }

    @Test("§3.10 a port in mode A does not wake a loop in mode B; its messages wait and arrive in order when A runs")
    func portInOtherModeDoesNotWakeLoopAndMessagesWaitInOrder() throws {
        let port = try MessagePort()
        let got = Recorder<UInt32>()
        let wrongMode = Counter()
        let events = Recorder<String>()
        let lt = LoopThread { loop -> (RLResult, RLResult) in
            port.setHandler { m in
                if loop.currentMode != "A" { wrongMode.increment() }
                got.append(m.msgid)
                if got.count == 5 { loop.stop() }
            }
            loop.add(port, forMode: "A")
            loop.add(keepAliveSource(), forMode: "B")
            loop.add(recordingObserver(events, activities: .afterWaiting), forMode: "B")
            let inB = loop.run(mode: "B", for: longRun, returnAfterSourceHandled: false)
            let inA = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: false)
            return (inB, inA)
        }
        #expect(lt.waitUntilSleeping(in: "B"))
        for id: UInt32 in 1...5 { try port.send(msgid: id, timeout: .seconds(5)) }
        settle()
        #expect(events.count == 0, "a port of mode A woke the loop sleeping in B")
        #expect(got.count == 0)
        #expect(port.queuedCount == 5)
        lt.loop.perform(inModes: ["B"]) { lt.loop.stop() }
        let r = try #require(lt.join())
        #expect(r.0 == .stopped)
        #expect(events.count == 1, "afterWaiting in B: \(events.count), expected 1 (the perform)")
        #expect(r.1 == .stopped)
        #expect(got.values == [1, 2, 3, 4, 5])
        #expect(wrongMode.current == 0)
        port.invalidate()
    }

    @Test("§3.10 a Source0 of mode A is not performed while the loop runs mode B")
    func source0OfOtherModeIsNotServiced() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Int, RLResult, Int) in
            let count = Counter()
            let s = RunLoopSource { count.increment() }
            loop.add(s, forMode: "A")
            loop.add(farFutureTimer(), forMode: "B")
            s.signal()
            let inB = loop.run(mode: "B", for: .milliseconds(100), returnAfterSourceHandled: true)
            let countInB = count.current
            let inA = loop.run(mode: "A", for: longRun, returnAfterSourceHandled: true)
            return (inB, countInB, inA, count.current)
        })
        #expect(r.0 == .timedOut)
        #expect(r.1 == 0)
        #expect(r.2 == .handledSource)
        #expect(r.3 == 1)
    }
}

// The semantics the cheaper pass must keep (issue: passes that do not grow with idle items,
// wake-ups on a futex): blocks in the pass that woke, timers in fire-date order, ports found
// through the ready list, and a loop asleep on its futex that must move to epoll.

import FoundationEssentials
import Glibc
import RunLoopKit
import Testing

/// Ports, far-future timers and never-written eventfd sources that must cost a pass nothing.
private func addIdleItems(to loop: ThreadRunLoop, ports: Int, timers: Int) -> [MessagePort] {
    let idlePorts = (0..<ports).map { _ in try! MessagePort() }
    for port in idlePorts {
        port.setHandler { _ in }
        loop.add(port, forMode: .default)
    }
    for _ in 0..<timers { loop.add(farFutureTimer(), forMode: .default) }
    return idlePorts
}

@Suite("Pass cost: the semantics it keeps")
struct PassCostTests {

    @Test("a block performed on a sleeping loop runs in the pass that woke, after afterWaiting and before the next pass's observers")
    func blockRunsInTheWokenPass() throws {
        let events = Recorder<String>()
        let thread = LoopThread(gated: true) { loop -> RLResult in
            loop.add(recordingObserver(events, activities: [.beforeTimers, .beforeWaiting, .afterWaiting]), forMode: .default)
            loop.add(keepAliveSource(), forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        thread.go()
        #expect(thread.waitUntilSleeping())
        thread.loop.perform { events.append("block") }
        #expect(thread.join() == .handledSource)
        #expect(events.values.suffix(3) == ["beforeWaiting", "afterWaiting", "block"])
    }

    @Test("timers due at the same instant fire in fire-date order, whatever order they were added in")
    func dueTimersFireInFireDateOrder() {
        let fired = onLoopThread { loop -> [Int] in
            let order = Recorder<Int>()
            let base = ContinuousClock.now - .milliseconds(10)
            for offset in [3, 1, 4, 2, 0] {
                loop.add(RunLoopTimer(fireAt: base + .microseconds(offset)) { _ in order.append(offset) }, forMode: .default)
            }
            loop.run(mode: .default, for: .milliseconds(50), returnAfterSourceHandled: false)
            return order.values
        }
        #expect(fired == [0, 1, 2, 3, 4])
    }

    @Test("among 1,000 idle ports, a port added and one already there are found when they get a message; a removed one is not serviced")
    func readyListFindsAddedAndRemovedPorts() throws {
        let thread = ResidentThread(name: uniqueThreadName("pass-ports"))
        defer { thread.stop() }
        let idle = addIdleItems(to: thread.runLoop, ports: 1_000, timers: 0)
        let got = Recorder<UInt32>()
        let added = try MessagePort()
        added.setHandler { got.append($0.msgid) }
        thread.runLoop.add(added, forMode: .default)
        try added.send(msgid: 1, timeout: .seconds(5))
        #expect(waitUntil { got.values == [1] })

        let removed = idle[500]
        removed.setHandler { got.append($0.msgid) }
        thread.runLoop.remove(removed, forMode: .default)
        try removed.send(msgid: 2, timeout: .seconds(5))
        idle[999].setHandler { got.append($0.msgid) }
        try idle[999].send(msgid: 3, timeout: .seconds(5))
        #expect(waitUntil { got.values == [1, 3] })
        #expect(removed.queuedCount == 1)

        // Added back, it delivers what waited for it.
        thread.runLoop.add(removed, forMode: .default)
        #expect(waitUntil { got.values == [1, 3, 2] })
    }

    @Test("a timer moved earlier from another thread while the loop sleeps among 1,000 idle timers fires at its new date")
    func timerMovedEarlierAmongIdleTimers() throws {
        let thread = ResidentThread(name: uniqueThreadName("pass-timers"))
        defer { thread.stop() }
        _ = addIdleItems(to: thread.runLoop, ports: 0, timers: 1_000)
        let fired = Flag()
        let timer = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in fired.set() }
        thread.runLoop.add(timer, forMode: .default)
        try thread.perform(waitUntilDone: true) {}
        #expect(waitUntil { thread.runLoop.isWaiting })
        timer.fireDate = .now + .milliseconds(10)
        #expect(waitUntil { fired.isSet })
    }

    @Test("a loop asleep with no descriptor to watch wakes for an fd source added from another thread")
    func futexSleeperMovesToEpoll() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let thread = ResidentThread(name: uniqueThreadName("pass-fd"))
        defer { thread.stop() }
        try thread.perform(waitUntilDone: true) {}
        #expect(waitUntil { thread.runLoop.isWaiting })
        let readable = Flag()
        let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
            _ = drainEventFD(fd)
            readable.set()
        }
        thread.runLoop.add(source, forMode: .default)
        writeEventFD(fd)
        #expect(waitUntil { readable.isSet })
        source.invalidate()
    }

    @Test("a loop asleep with no descriptor to watch wakes for frames on a send right made while it sleeps")
    func futexSleeperReadsSendRights() throws {
        let thread = ResidentThread(name: uniqueThreadName("pass-right"))
        defer { thread.stop() }
        let port = try MessagePort()
        let got = Recorder<UInt32>()
        port.setHandler { got.append($0.msgid) }
        thread.runLoop.add(port, forMode: .default)
        try thread.perform(waitUntilDone: true) {}
        #expect(waitUntil { thread.runLoop.isWaiting })
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        try proxy.send(msgid: 42, timeout: .seconds(5))
        #expect(waitUntil { got.values == [42] })
    }
}

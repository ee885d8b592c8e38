// Guarantees §3.19: a ResidentThread's keep-alive counts as a source of its default mode for every
// invocation on that thread, nested ones too.

import Glibc
import RunLoopKit
import Testing

@Suite("§3.19 resident keep-alive in nested runs")
struct ResidentNestedRunTests {

    @Test("§3.19 a block on a resident thread that runs the default mode sleeps until a source is handled, not false at once")
    func nestedRunSleepsUntilASourceIsHandled() throws {
        let thread = ResidentThread(name: uniqueThreadName("nest"))
        defer { thread.stop() }
        let events = Recorder<String>()
        try thread.perform {
            events.append("nested run starts")
            let result = ThreadRunLoop.current.run(mode: .default, before: .now + longRun)
            events.append("nested run returned \(result)")
        }
        #expect(waitUntil { thread.runLoop.isWaiting && events.count == 1 })
        try thread.perform { events.append("second block") }
        #expect(waitUntil { events.count == 3 })
        #expect(events.values == ["nested run starts", "second block", "nested run returned true"])
    }

    @Test("§3.19 the nested run also ends at its deadline (true: the mode was not empty), and a port message ends it")
    func nestedRunEndsAtDeadlineOrOnAMessage() throws {
        let thread = ResidentThread(name: uniqueThreadName("nest2"))
        defer { thread.stop() }
        let results = Recorder<String>()
        try thread.perform(waitUntilDone: true) {
            let result = ThreadRunLoop.current.run(mode: .default, for: .milliseconds(50), returnAfterSourceHandled: true)
            results.append("\(result)")
        }
        let port = try MessagePort()
        port.setHandler { results.append("message \($0.msgid)") }
        thread.runLoop.add(port, forMode: .default)
        try thread.perform {
            results.append("nested run starts")
            let result = ThreadRunLoop.current.run(mode: .default, before: .now + longRun)
            results.append("nested \(result)")
        }
        #expect(waitUntil { thread.runLoop.isWaiting && results.count == 2 })
        try port.send(msgid: 9, timeout: waitLimit)
        #expect(waitUntil { results.count == 4 })
        #expect(results.values == ["timedOut", "nested run starts", "message 9", "nested true"])
        port.invalidate()
    }

    @Test("§3.19 stopping the thread while a nested run sleeps ends the nested run and the thread")
    func stopEndsNestedAndOuterRuns() throws {
        let thread = ResidentThread(name: uniqueThreadName("nest3"))
        let results = Recorder<String>()
        try thread.perform {
            results.append("nested run starts")
            results.append("nested \(ThreadRunLoop.current.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
        }
        #expect(waitUntil { thread.runLoop.isWaiting && results.count == 1 })
        let stopped = onFreshThread(timeout: waitLimit) { thread.stop(); return true }
        #expect(stopped == true)
        #expect(thread.isFinished)
        #expect(results.values == ["nested run starts", "nested stopped"])
    }

    @Test("§3.19 the keep-alive is the resident thread's alone: a plain thread's nested empty default mode still returns false at once")
    func plainThreadsHaveNoKeepAlive() {
        let result = onLoopThread { loop in loop.run(mode: .default, before: .now + longRun) }
        #expect(result == false)
    }
}

// Guarantees §3.37: HangWatch, a thread that reports loops stuck in one callout or one pass.
//
// A stalled callout blocks until the report it provokes has arrived (or a generous hang guard
// passes), so no test depends on how fast the watch is — except the one clause that states a
// bound: a stall is reported within 2 × the threshold of its start.

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing

private let threshold: Duration = .milliseconds(500)

/// A hang report, with when it arrived and on which thread.
private struct HangReport: Sendable {
    var loop: ThreadRunLoop
    var callout: ThreadRunLoop.Callout?
    var at: ContinuousClock.Instant
    var tid: pid_t
}

/// A watch over `loops` that records its reports.
private func recordingWatch(_ loops: [ThreadRunLoop], threshold: Duration = threshold) -> (HangWatch, Recorder<HangReport>) {
    let reports = Recorder<HangReport>()
    let watch = HangWatch(loops: loops, threshold: threshold) { loop, callout in
        reports.append(HangReport(loop: loop, callout: callout, at: .now, tid: gettid()))
    }
    return (watch, reports)
}

/// Blocks the calling callout until `reports` holds `count` reports (or the hang guard passes),
/// then for `extra` longer; returns when it began.
@discardableResult
private func stall(until reports: Recorder<HangReport>, count: Int, extra: Duration = .zero) -> ContinuousClock.Instant {
    let began = ContinuousClock.now
    _ = waitUntil { reports.count >= count }
    if extra > .zero { block(for: extra) }
    return began
}

@Suite("§3.37 HangWatch")
struct HangWatchTests {

    @Test("§3.37 a loop that stays inside one callout longer than the threshold is reported within 2 × the threshold, with that callout")
    func stuckCalloutReportedWithTheCallout() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-callout"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        defer { watch.stop() }
        let began = Ref<ContinuousClock.Instant>()
        let port = try MessagePort()
        port.label = "requests"
        port.setHandler { _ in began.value = stall(until: reports, count: 1) }
        thread.runLoop.add(port, forMode: .default)
        try port.send(msgid: 7, timeout: .seconds(5))
        #expect(waitUntil { reports.count == 1 && began.value != nil })
        let report = try #require(reports.values.first)
        let stallBegan = try #require(began.value)
        #expect(report.loop === thread.runLoop)
        let callout = try #require(report.callout, "the report names the callout the loop is stuck in")
        #expect(callout.kind == .port)
        #expect(callout.label == "requests")
        #expect(callout.msgid == 7)
        #expect(callout.mode == .default)
        #expect(callout.started <= stallBegan)
        #expect(callout.started + callout.duration <= report.at, "the duration so far, at the report")
        #expect(report.at - stallBegan <= threshold * 2, "reported \(report.at - stallBegan) after the stall began")
        port.invalidate()
    }

    @Test("§3.37 a loop that stays inside one pass longer than the threshold, through many short callouts, is reported")
    func stuckPassReported() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-pass"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        defer { watch.stop() }
        // One pass delivers the whole queue; each message takes a tenth of the threshold, and
        // the last ones wait for the report, so the pass outlasts the threshold.
        let port = try MessagePort(queueLimit: 1024)
        port.label = "batch"
        let handled = Counter()
        port.setHandler { _ in
            if handled.increment() <= 40 { block(for: threshold / 10) } else { _ = waitUntil { reports.count >= 1 } }
        }
        let gate = Flag()
        try thread.perform { _ = waitUntil { gate.isSet } }   // hold the loop while the batch queues
        thread.runLoop.add(port, forMode: .default)
        for msgid in 0..<60 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        gate.set()
        #expect(waitUntil { reports.count >= 1 && handled.current == 60 })
        let report = try #require(reports.values.first)
        #expect(report.callout?.kind == .port && report.callout?.label == "batch",
                "stuck among the port's callouts: \(String(describing: report.callout))")
        port.invalidate()
    }

    @Test("§3.37 a stall is reported once, however long it lasts")
    func reportedOncePerStall() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-once"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        defer { watch.stop() }
        // After the first report, the loop stays stuck for four more thresholds.
        try thread.perform(waitUntilDone: true) { stall(until: reports, count: 1, extra: threshold * 4) }
        try thread.perform(waitUntilDone: true) {}
        #expect(reports.count == 1, "\(reports.values.map(\.callout))")
        #expect(reports.values.first?.callout?.kind == .block)
    }

    @Test("§3.37 a loop is reported again only after it came back and stalled anew")
    func reportedAgainAfterComingBack() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-again"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        defer { watch.stop() }
        let first = RunLoopSource { stall(until: reports, count: 1, extra: threshold * 2) }
        first.label = "first"
        let second = RunLoopSource { stall(until: reports, count: 2) }
        second.label = "second"
        thread.runLoop.add(first, forMode: .default)
        thread.runLoop.add(second, forMode: .default)
        first.signal()
        thread.runLoop.wakeUp()
        #expect(waitUntil { reports.count == 1 })
        try thread.perform(waitUntilDone: true) {}          // came back
        #expect(reports.count == 1)
        second.signal()
        thread.runLoop.wakeUp()
        #expect(waitUntil { reports.count == 2 })
        try thread.perform(waitUntilDone: true) {}
        #expect(reports.values.map { $0.callout?.label } == ["first", "second"])
        first.invalidate()
        second.invalidate()
    }

    @Test("§3.37 a loop asleep in its wait, for however long, is never reported (and the watch still sees the next stall)")
    func sleepingLoopNeverReported() throws {
        let sleeper = ResidentThread(name: uniqueThreadName("hang-sleep"))
        defer { sleeper.stop() }
        let (watch, reports) = recordingWatch([sleeper.runLoop])
        defer { watch.stop() }
        sleeper.runLoop.add(farFutureTimer(), forMode: .default)
        #expect(waitUntil { sleeper.runLoop.isWaiting })
        pause(threshold * 4)
        #expect(reports.count == 0, "a sleeping loop was reported: \(reports.values.map(\.callout))")
        try sleeper.perform(waitUntilDone: true) { stall(until: reports, count: 1) }
        #expect(reports.count == 1)
    }

    @Test("§3.37 a loop that keeps completing passes is never reported")
    func busyLoopCompletingPassesNeverReported() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-busy"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        defer { watch.stop() }
        // Busy for four thresholds, in passes of a tenth of the threshold each.
        let ticks = Counter()
        let timer = RunLoopTimer(fireAt: .now, interval: threshold / 20) { timer in
            block(for: threshold / 10)
            if ticks.increment() == 40 { timer.invalidate() }
        }
        thread.runLoop.add(timer, forMode: .default)
        #expect(waitUntil { ticks.current == 40 })
        #expect(reports.count == 0, "a loop completing passes was reported: \(reports.values.map(\.callout))")
        try thread.perform(waitUntilDone: true) { stall(until: reports, count: 1) }
        #expect(reports.count == 1)
    }

    @Test("§3.37 a watch whose loops are all asleep sleeps too: no wake-ups of its thread")
    func watchSleepsWhileLoopsSleep() throws {
        let a = ResidentThread(name: uniqueThreadName("hang-idle-a"))
        let b = ResidentThread(name: uniqueThreadName("hang-idle-b"))
        defer {
            a.stop()
            b.stop()
        }
        let (watch, reports) = recordingWatch([a.runLoop, b.runLoop])
        defer { watch.stop() }
        // A first stall tells which thread is the watch's (reports run on it).
        try a.perform(waitUntilDone: true) { stall(until: reports, count: 1) }
        let watchThread = try #require(reports.values.first?.tid)
        #expect(waitUntil { a.runLoop.isWaiting && b.runLoop.isWaiting })
        // The watch parks once it has looked at the idle loops (a quarter threshold at most).
        pause(threshold * 2)
        let before = try #require(contextSwitches(of: watchThread))
        pause(.seconds(1))
        let after = try #require(contextSwitches(of: watchThread))
        #expect(after == before, "the watch thread woke \(after - before) times in one second while its loops slept")
        // Still watching: a loop leaving its wait wakes it.
        try b.perform(waitUntilDone: true) { stall(until: reports, count: 2) }
        #expect(reports.values.last?.loop === b.runLoop)
    }

    @Test("HangWatch.stop: no report after stop() returns; the loops no longer time their callouts")
    func stopEndsReporting() throws {
        let thread = ResidentThread(name: uniqueThreadName("hang-stop"))
        defer { thread.stop() }
        let (watch, reports) = recordingWatch([thread.runLoop])
        try thread.perform(waitUntilDone: true) {}
        #expect(thread.runLoop.statistics.timedCallouts >= 1)
        watch.stop()
        watch.stop()
        let timed = thread.runLoop.statistics.timedCallouts
        try thread.perform(waitUntilDone: true) { block(for: threshold * 3) }
        #expect(reports.count == 0)
        #expect(thread.runLoop.statistics.timedCallouts == timed)
    }
}

/// Voluntary plus involuntary context switches of thread `tid` of this process.
private func contextSwitches(of tid: pid_t) -> Int? {
    guard let status = readText("/proc/self/task/\(tid)/status") else { return nil }
    var total = 0
    for line in status.split(separator: "\n") where line.contains("ctxt_switches:") {
        guard let value = Int(String(line.drop { $0 != "\t" }.dropFirst())) else { return nil }
        total += value
    }
    return total
}

/// Sleeps the calling thread for `duration` (giving a broken watch the time to misbehave).
private func pause(_ duration: Duration) {
    let (seconds, attoseconds) = duration.components
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int(attoseconds / 1_000_000_000))
    var remaining = timespec()
    while nanosleep(&request, &remaining) != 0 && errno == EINTR { request = remaining }
}

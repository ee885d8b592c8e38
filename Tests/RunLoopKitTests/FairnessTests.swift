// Guarantees §3.52 (fairness under load), §3.55 (stop after the callout in progress) and §3.56
// (progress is a callout that returned).
//
// A loaded loop here is a resident thread whose port handler sleeps for a while per message and
// whose queue two feeding threads keep full. Every assertion counts messages, never time: how
// many messages *began* after an event became due and before the loop served it. A fair loop
// serves it after the message in progress returns, so none began in between.

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization
import Testing

/// A resident thread whose port never empties while `feeding` is set.
private final class LoadedThread: Sendable {
    let thread: ResidentThread
    let port: MessagePort
    /// When each message's handler began.
    let starts = Recorder<ContinuousClock.Instant>()
    let feeding = Flag()
    private let stopped = Flag()
    private let feeders = Counter()

    init(name: String, handlerTime: Duration) throws {
        thread = ResidentThread(name: uniqueThreadName(name))
        port = try MessagePort(queueLimit: 64)
        port.setHandler { [starts] _ in
            starts.append(.now)
            block(for: handlerTime)
        }
        thread.runLoop.add(port, forMode: .default)
    }

    /// Starts the two feeding threads and returns once the queue is full. The loop's timers and
    /// descriptors are added before, as a daemon adds them at start.
    func start() {
        feeding.set()
        for _ in 0..<2 {
            startThread { [port, feeding, stopped, feeders] in
                while !stopped.isSet {
                    guard feeding.isSet else { usleep(1_000); continue }
                    try? port.send(msgid: 1, timeout: .milliseconds(100))
                }
                feeders.increment()
            }
        }
        // The queue is full before anything else is asked of the loop.
        _ = waitUntil { port.queuedCount >= 32 }
    }

    /// Three times: a while into the load, `trigger()` makes an event due and the test waits
    /// until `handled` grows; no message of the busy port may begin in between. `what` names
    /// the event in failures.
    func expectServedNext(_ what: String, handled: Recorder<ContinuousClock.Instant>,
                          trigger: () throws -> Void) throws {
        for _ in 0..<3 {
            let before = handled.count
            usleep(120_000)
            let due = ContinuousClock.now
            try trigger()
            #expect(waitUntil { handled.count > before }, "\(what) was not handled under load")
            let ran = try #require(handled.values.last)
            let late = messagesBegun(after: due, before: ran)
            #expect(late == 0, "\(late) messages of the busy port began after \(what) was due and before it was handled")
        }
    }

    /// Messages whose handler began strictly between `from` and `to`.
    func messagesBegun(after from: ContinuousClock.Instant, before to: ContinuousClock.Instant) -> Int {
        starts.values.count { $0 > from && $0 < to }
    }

    func finish() {
        feeding.set()
        stopped.set()
        port.invalidate()
        _ = waitUntil { feeders.current == 2 }
        thread.stop()
    }
}

@Suite("§3.52 fairness under load")
struct FairnessTests {

    @Test("§3.52 a loop whose port never empties fires each due timer after the message in progress")
    func timersFireUnderLoad() throws {
        let loaded = try LoadedThread(name: "fair-timer", handlerTime: .milliseconds(50))
        defer { loaded.finish() }
        // Each fire records when it was due (its fire date) and when it ran.
        let fires = Recorder<(due: ContinuousClock.Instant, ran: ContinuousClock.Instant)>()
        let timer = RunLoopTimer(interval: .milliseconds(200), repeats: true) { timer in
            let ran = ContinuousClock.now
            // Inside the handler the fire date is still this fire's.
            fires.append((timer.fireDate, ran))
        }
        loaded.thread.runLoop.add(timer, forMode: .default)
        loaded.start()
        #expect(waitUntil { fires.count >= 8 }, "the timer fired \(fires.count) times under load")
        timer.invalidate()
        for fire in fires.values {
            let late = loaded.messagesBegun(after: fire.due, before: fire.ran)
            #expect(late == 0, "\(late) messages began after the timer was due and before it fired")
        }
    }

    @Test("§3.52 a loop whose port never empties runs a ready fd source after the message in progress")
    func descriptorsServedUnderLoad() throws {
        let loaded = try LoadedThread(name: "fair-fd", handlerTime: .milliseconds(50))
        defer { loaded.finish() }
        var fds: [Int32] = [0, 0]
        #expect(pipe2(&fds, O_CLOEXEC | O_NONBLOCK) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let handled = Recorder<ContinuousClock.Instant>()
        let source = FileDescriptorSource(fileDescriptor: fds[0], events: .readable) { [fd = fds[0]] _, _ in
            var byte: UInt8 = 0
            _ = read(fd, &byte, 1)
            handled.append(.now)
        }
        loaded.thread.runLoop.add(source, forMode: .default)
        defer { source.invalidate() }
        loaded.start()
        try loaded.expectServedNext("the pipe", handled: handled) {
            var byte: UInt8 = 1
            #expect(write(fds[1], &byte, 1) == 1)
        }
    }

    @Test("§3.52 a loop whose port never empties accepts a connection to a name it publishes")
    func connectToASaturatedPublisher() throws {
        let loaded = try LoadedThread(name: "fair-name", handlerTime: .milliseconds(50))
        defer { loaded.finish() }
        let name = "rlk-fair-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try loaded.port.publish(as: name)
        loaded.start()
        // The load never stops on its own: without fairness the owner's loop never reads the
        // handshake and the connect fails after its 30 s.
        let result: Result<MessagePort, PortError>? = onFreshThread(timeout: .seconds(60)) {
            do throws(PortError) {
                return .success(try MessagePort.connect(to: name))
            } catch {
                return .failure(error)
            }
        }
        let connected = try #require(result, "connect did not return")
        #expect(throws: Never.self) { _ = try connected.get() }
        #expect(loaded.feeding.isSet, "the load was still running")
    }

    @Test("§3.52 a loop whose port never empties delivers to another port's send-right connection after the message in progress")
    func sendRightConnectionServedUnderLoad() throws {
        let loaded = try LoadedThread(name: "fair-conn", handlerTime: .milliseconds(50))
        defer { loaded.finish() }
        let other = try MessagePort()
        let delivered = Recorder<ContinuousClock.Instant>()
        other.setHandler { _ in delivered.append(.now) }
        loaded.thread.runLoop.add(other, forMode: .default)
        defer { other.invalidate() }
        let proxy = try MessagePort(sendRight: try other.makeSendRight())
        defer { proxy.invalidate() }
        loaded.start()
        try loaded.expectServedNext("the connection's message", handled: delivered) {
            try proxy.send(msgid: 2, timeout: .seconds(5))
        }
    }

    @Test("§3.52 a pass delivers at most one batch per port: a port's queue refilled during its batch waits for the next pass")
    func oneBatchPerPortPerPass() throws {
        let thread = ResidentThread(name: uniqueThreadName("fair-batch"))
        defer { thread.stop() }
        let port = try MessagePort(queueLimit: 16)
        let passAtDelivery = Recorder<UInt64>()
        let refilled = Flag()
        port.setHandler { [loop = thread.runLoop] message in
            passAtDelivery.append(loop.statistics.passes)
            // The first batch's first message refills the queue behind it.
            if message.msgid == 0 && !refilled.isSet {
                refilled.set()
                for msgid in 100..<104 as Range<UInt32> { try? port.send(msgid: msgid, timeout: .seconds(5)) }
            }
        }
        let gate = Flag()
        try thread.perform { _ = waitUntil { gate.isSet } }
        thread.runLoop.add(port, forMode: .default)
        for msgid in 0..<4 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        gate.set()
        #expect(waitUntil { passAtDelivery.count == 8 })
        let passes = passAtDelivery.values
        #expect(Set(passes[0..<4]).count == 1, "the first batch is delivered in one pass")
        #expect(passes[4] > passes[3], "the messages queued during the batch wait for a later pass")
        port.invalidate()
    }
}

@Suite("§3.55 stop after the callout in progress")
struct StopAfterCalloutTests {

    @Test("§3.55 ResidentThread.stop() during a 30 × 100 ms batch returns after the callout in progress; the rest stay queued in order for a later run")
    func stopCostsOneCallout() throws {
        let thread = ResidentThread(name: uniqueThreadName("stop-batch"))
        let port = try MessagePort(queueLimit: 64)
        let delivered = Recorder<UInt32>()
        let began = Flag()
        port.setHandler { message in
            delivered.append(message.msgid)
            began.set()
            block(for: .milliseconds(100))
        }
        let gate = Flag()
        try thread.perform { _ = waitUntil { gate.isSet } }
        thread.runLoop.add(port, forMode: .default)
        for msgid in 0..<30 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        gate.set()
        #expect(waitUntil { began.isSet })
        thread.stop()
        let deliveredByStop = delivered.values
        #expect(deliveredByStop.count <= 2, "stop() waited for \(deliveredByStop.count) callouts, not one")
        #expect(deliveredByStop == Array(0..<UInt32(deliveredByStop.count)))
        #expect(port.isValid)
        #expect(port.queuedCount == 30 - deliveredByStop.count, "the taken messages went back to the queue")

        // A later run delivers the rest, in order.
        let next = ResidentThread(name: uniqueThreadName("stop-next"))
        defer { next.stop() }
        port.setHandler { message in delivered.append(message.msgid) }
        next.runLoop.add(port, forMode: .default)
        #expect(waitUntil { delivered.count == 30 })
        #expect(delivered.values == Array(0..<30))
        port.invalidate()
    }

    @Test("§3.55 ThreadRunLoop.stop() during a batch ends the run after the callout in progress")
    func loopStopEndsTheBatch() throws {
        let port = try MessagePort(queueLimit: 64)
        let delivered = Counter()
        port.setHandler { _ in
            if delivered.increment() == 1 { ThreadRunLoop.current.stop() }
        }
        for msgid in 0..<20 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        let result = onLoopThread { loop -> RLResult in
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(result == .stopped)
        #expect(delivered.current == 1)
        #expect(port.queuedCount == 19)
        port.invalidate()
    }

    @Test("§3.55 ResidentThread.stop() with 20 queued 50 ms blocks returns after the block in progress; the rest do not run")
    func stopDoesNotWaitForQueuedBlocks() throws {
        let thread = ResidentThread(name: uniqueThreadName("stop-blocks"))
        let ran = Counter()
        let began = Flag()
        let gate = Flag()
        try thread.perform { _ = waitUntil { gate.isSet } }
        for _ in 0..<20 {
            try thread.perform {
                began.set()
                block(for: .milliseconds(50))
                ran.increment()
            }
        }
        gate.set()
        #expect(waitUntil { began.isSet })
        thread.stop()
        #expect(ran.current <= 2, "stop() waited for \(ran.current) blocks, not one")
        #expect(throws: ResidentThread.Failure.finished) { try thread.perform {} }
    }

    @Test("§3.55 a loop stopped by one of its blocks leaves the blocks queued behind it for the next run, in order")
    func stoppedBlocksStayQueued() throws {
        let order = Recorder<Int>()
        let results = onLoopThread { loop -> (RLResult, RLResult) in
            loop.perform { order.append(0); loop.stop() }
            for index in 1...3 { loop.perform { order.append(index) } }
            let first = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            let second = loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: false)
            return (first, second)
        }
        let (first, second) = try #require(results)
        #expect(first == .stopped)
        #expect(second == .finished, "the second run ran the rest and found the mode empty")
        #expect(order.values == [0, 1, 2, 3])
    }

    @Test("§3.55 invalidate() during a batch: the messages not yet delivered are counted as discarded")
    func invalidateDiscardsTheRest() throws {
        let port = try MessagePort(queueLimit: 64)
        let delivered = Counter()
        port.setHandler { [weak port] _ in
            if delivered.increment() == 3 { port?.invalidate() }
        }
        for msgid in 0..<20 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        _ = onLoopThread { loop in
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .seconds(1), returnAfterSourceHandled: false)
        }
        #expect(delivered.current == 3)
        #expect(port.statistics.discarded == 17)
    }
}

@Suite("§3.56 progress is a callout that returned")
struct CalloutProgressTests {

    @Test("§3.56 a loop completing the callouts of one long batch is never reported stuck")
    func longBatchIsProgress() throws {
        let thread = ResidentThread(name: uniqueThreadName("progress"))
        defer { thread.stop() }
        let reports = Recorder<String>()
        let watch = HangWatch(loops: [thread.runLoop], threshold: .milliseconds(300)) { _, callout in
            reports.append(String(describing: callout))
        }
        defer { watch.stop() }
        let port = try MessagePort(queueLimit: 64)
        let handled = Counter()
        port.setHandler { _ in
            block(for: .milliseconds(100))
            handled.increment()
        }
        let gate = Flag()
        try thread.perform { _ = waitUntil { gate.isSet } }
        thread.runLoop.add(port, forMode: .default)
        for msgid in 0..<20 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        let passesBefore = thread.runLoop.statistics.passes
        gate.set()
        #expect(waitUntil { handled.current == 20 })
        #expect(reports.values.isEmpty, "reported: \(reports.values)")
        // The batch was one pass (no timers or descriptors in the mode), yet every callout counted.
        #expect(thread.runLoop.statistics.passes - passesBefore <= 3)
        #expect(thread.runLoop.statistics.callouts >= 21)
        port.invalidate()
    }

    @Test("§3.56 a reported hang names the callout, with a duration at least the threshold")
    func hangDurationIsTheStall() throws {
        let thread = ResidentThread(name: uniqueThreadName("progress-hang"))
        defer { thread.stop() }
        let threshold = Duration.milliseconds(300)
        let reports = Recorder<ThreadRunLoop.Callout?>()
        let watch = HangWatch(loops: [thread.runLoop], threshold: threshold) { _, callout in reports.append(callout) }
        defer { watch.stop() }
        try thread.perform { _ = waitUntil { reports.count >= 1 } }
        #expect(waitUntil { reports.count >= 1 })
        let callout = try #require(reports.values.first ?? nil)
        #expect(callout.kind == .block)
        #expect(callout.duration >= threshold, "reported \(callout.duration) for a stall of at least \(threshold)")
    }

    @Test("§3.56 Statistics.callouts counts returned callouts, which move while a batch keeps the pass count still")
    func calloutsCountWithinAPass() throws {
        let port = try MessagePort(queueLimit: 64)
        let samples = Recorder<(passes: UInt64, callouts: UInt64)>()
        port.setHandler { _ in
            let statistics = ThreadRunLoop.current.statistics
            samples.append((statistics.passes, statistics.callouts))
        }
        for msgid in 0..<10 as Range<UInt32> { try port.send(msgid: msgid, timeout: .seconds(5)) }
        _ = onLoopThread { loop in
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: false)
        }
        let values = samples.values
        #expect(values.count == 10)
        #expect(Set(values.map(\.passes)).count == 1, "one pass")
        #expect(values.map(\.callouts) == Array(values[0].callouts..<values[0].callouts + 10))
        port.invalidate()
    }
}

// Port and loop statistics (`MessagePort.Statistics`, `ThreadRunLoop.Statistics`): each
// counter counts exactly what its documentation says.

import FoundationEssentials
import RunLoopKit
import Testing

private func payload(_ n: Int) -> [MessagePort.Message.Component] { [.data(Data([UInt8(truncatingIfNeeded: n)]))] }

@Suite("Port statistics")
struct PortStatisticsTests {

    @Test("sent, queue high water, delivered: messages queued before a receiver, then delivered on its loop")
    func sentHighWaterDelivered() throws {
        let port = try MessagePort(queueLimit: 16)
        for n in 0..<5 { try port.send(msgid: 1, components: payload(n), timeout: .seconds(5)) }
        var before = MessagePort.Statistics()
        before.sent = 5
        before.queueHighWater = 5
        #expect(port.statistics == before)

        let thread = ResidentThread(name: uniqueThreadName("stats-port"))
        defer { thread.stop() }
        let received = Counter()
        port.setHandler { _ in received.increment() }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { received.current == 5 })
        for n in 0..<3 { try port.send(msgid: 2, components: payload(n), timeout: .seconds(5)) }
        #expect(waitUntil { received.current == 8 })

        let after = port.statistics
        #expect(after.sent == 8)
        #expect(after.delivered == 8)
        #expect(after.discarded == 0)
        #expect(after.queueHighWater == 5)
        #expect(after.sendersBlocked == 0)
    }

    @Test("discarded equals discardedCount after invalidation drops queued messages")
    func discarded() throws {
        let port = try MessagePort()
        for n in 0..<7 { try port.send(msgid: 1, components: payload(n), timeout: .seconds(5)) }
        port.invalidate()
        let statistics = port.statistics
        #expect(statistics.sent == 7)
        #expect(statistics.discarded == 7)
        #expect(statistics.delivered == 0)
        #expect(Int(statistics.discarded) == port.discardedCount)
    }

    @Test("a port invalidated by its handler in the middle of a batch: every message is delivered or discarded, none lost")
    func invalidatedMidBatchLosesNothing() throws {
        let port = try MessagePort()
        for n in 0..<10 { try port.send(msgid: UInt32(n), components: payload(n), timeout: .seconds(5)) }
        let handled = Counter()
        port.setHandler { message in
            handled.increment()
            if message.msgid == 2 { port.invalidate() }
        }
        let thread = ResidentThread(name: uniqueThreadName("stats-batch"))
        defer { thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { !port.isValid && port.statistics.delivered + port.statistics.discarded == 10 })
        let statistics = port.statistics
        #expect(statistics.delivered == 3)
        #expect(statistics.discarded == 7)
        #expect(handled.current == 3)
        #expect(port.discardedCount == 7)
    }

    @Test("sendersBlocked counts each send that waited for room once, synchronous and async")
    func sendersBlocked() async throws {
        let port = try MessagePort(queueLimit: 1)
        try port.send(msgid: 1, timeout: .seconds(5))
        #expect(port.statistics.sendersBlocked == 0)
        #expect(throws: PortError.timedOut) { try port.send(msgid: 2, timeout: .milliseconds(20)) }
        #expect(port.statistics.sendersBlocked == 1)

        let asyncSend = Task { try await port.send(msgid: 3) }
        #expect(await eventually { port.statistics.sendersBlocked == 2 })
        let messages = port.messages()
        var iterator = messages.makeAsyncIterator()
        #expect(await iterator.next()?.msgid == 1)
        try await asyncSend.value
        #expect(await iterator.next()?.msgid == 3)
        let statistics = port.statistics
        #expect(statistics.sendersBlocked == 2)
        #expect(statistics.sent == 2)
        #expect(statistics.delivered == 2)
    }

    @Test("messages(): a message handed to a waiting consumer counts as sent and delivered")
    func handOffCounts() async throws {
        let port = try MessagePort()
        let messages = port.messages()
        let consumer = Task { () -> UInt32? in
            var iterator = messages.makeAsyncIterator()
            return await iterator.next()?.msgid
        }
        // Whether the consumer is already waiting (a hand-off) or not yet (a queued message),
        // the message is sent and delivered once.
        try port.send(msgid: 9, timeout: .seconds(5))
        #expect(await consumer.value == 9)
        let statistics = port.statistics
        #expect(statistics.sent == 1)
        #expect(statistics.delivered == 1)
    }

    @Test("a proxy counts the frames it wrote; its owner counts them as sent and delivered")
    func proxyCountsFrames() throws {
        let port = try MessagePort()
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let thread = ResidentThread(name: uniqueThreadName("stats-proxy"))
        defer { thread.stop() }
        let received = Counter()
        port.setHandler { _ in received.increment() }
        thread.runLoop.add(port, forMode: .default)
        for n in 0..<4 { try proxy.send(msgid: 1, components: payload(n), timeout: .seconds(5)) }
        #expect(waitUntil { received.current == 4 })
        #expect(proxy.statistics.sent == 4)
        #expect(proxy.statistics.delivered == 0)
        #expect(port.statistics.sent == 4)
        // A batch is counted once its last handler returned, so the handlers can be seen first.
        #expect(waitUntil { port.statistics.delivered == 4 })
    }
}

@Suite("Loop statistics")
struct LoopStatisticsTests {

    @Test("a pass that handles one signalled source: one pass, one handled source, no wake-up")
    func onePassOneSource() {
        let deltas = onLoopThread { loop -> (ThreadRunLoop.Statistics, ThreadRunLoop.Statistics) in
            let source = RunLoopSource(perform: {})
            loop.add(source, forMode: .default)
            source.signal()
            let before = loop.statistics
            loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (before, loop.statistics)
        }
        let (before, after) = try! #require(deltas)
        #expect(after.passes - before.passes == 1)
        #expect(after.handledSources - before.handledSources == 1)
        #expect(after.wakeUps == before.wakeUps)
        #expect(after.timerFires == before.timerFires)
    }

    @Test("a run that sleeps until its one-shot timer: one pass, one wake-up, one timer fire, no handled source")
    func sleepUntilTimer() {
        let deltas = onLoopThread { loop -> (ThreadRunLoop.Statistics, ThreadRunLoop.Statistics) in
            loop.add(RunLoopTimer(fireAt: .now + .milliseconds(20)) { _ in }, forMode: .default)
            let before = loop.statistics
            loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (before, loop.statistics)
        }
        let (before, after) = try! #require(deltas)
        #expect(after.passes - before.passes == 1)
        #expect(after.wakeUps - before.wakeUps == 1)
        #expect(after.timerFires - before.timerFires == 1)
        #expect(after.handledSources == before.handledSources)
    }

    @Test("blocks performed from another thread count one handled source each, read from another thread")
    func blocksCountAsHandledSources() throws {
        let thread = ResidentThread(name: uniqueThreadName("stats-loop"))
        defer { thread.stop() }
        try thread.perform(waitUntilDone: true) {}
        // A pass is counted when it begins, before its sleep: both readings are taken while the
        // loop sleeps, so that a pass counted before the first reading cannot hold a wake-up
        // counted after it.
        #expect(waitUntil { thread.runLoop.isWaiting })
        let before = thread.runLoop.statistics
        for _ in 0..<10 { try thread.perform(waitUntilDone: true) {} }
        #expect(waitUntil { thread.runLoop.isWaiting })
        let after = thread.runLoop.statistics
        #expect(after.handledSources - before.handledSources == 10)
        #expect(after.timerFires == before.timerFires)
        // A block that arrives while the loop is still in its pass runs in that pass, so the
        // passes are not one per block; each sleep that ended began one pass at most.
        #expect(after.passes > before.passes)
        #expect(after.wakeUps - before.wakeUps <= after.passes - before.passes)
    }
}

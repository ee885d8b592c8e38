// Test 8: backpressure and the frame size limit on a proxy.

import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

@Suite("Proxy backpressure and limits", .timeLimit(.minutes(2)))
struct BackpressureTests {
    /// Sends 64-byte messages until one times out; returns how many went out, and the error.
    func fill(_ proxy: MessagePort, limit: Int = 1_000_000) -> (sent: Int, error: PortError?) {
        let payload = Data(repeating: 0xA5, count: 64)
        for index in 0..<limit {
            do {
                try proxy.send(msgid: UInt32(index), components: [.data(payload)], timeout: .milliseconds(50))
            } catch {
                return (index, error)
            }
        }
        return (limit, nil)
    }

    @Test("the owner's loop is not running: send(timeout: 50 ms) eventually throws .timedOut, and nothing is lost")
    func ownerLoopNotRunning() throws {
        let port = try MessagePort(queueLimit: 16)
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let (sent, error) = fill(proxy)
        #expect(error == .timedOut, "after \(sent) messages: \(String(describing: error))")
        #expect(sent > 0)

        // Once the owner drains, every message sent before the time-out arrives, in order,
        // and the one that timed out does not.
        let received = Shared<[UInt32]>([])
        port.setHandler { message in received.update { $0.append(message.msgid) } }
        let thread = ResidentThread(name: "backpressure-late-drain")
        defer { port.invalidate(); thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { received.value.count >= sent }, "delivered \(received.value.count) of \(sent)")
        #expect(received.value == Array(0..<UInt32(sent)))
        // The proxy still works after a time-out.
        try proxy.send(msgid: 777_777, timeout: waitLimit)
        #expect(waitUntil { received.value.last == 777_777 })
        #expect(received.value.count == sent + 1)
    }

    @Test("the owner's loop runs but the port has no receiver: reading pauses, senders time out")
    func ownerWithoutReceiver() throws {
        let port = try MessagePort(queueLimit: 8)
        let thread = ResidentThread(name: "backpressure-no-receiver")
        defer { port.invalidate(); thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let (sent, error) = fill(proxy)
        #expect(error == .timedOut, "after \(sent) messages: \(String(describing: error))")

        let received = Shared<[UInt32]>([])
        port.setHandler { message in received.update { $0.append(message.msgid) } }
        #expect(waitUntil { received.value.count >= sent }, "delivered \(received.value.count) of \(sent)")
        #expect(received.value == Array(0..<UInt32(sent)))
    }

    @Test("more than 64 components throw .messageTooLarge(limit: 65536); Data past the frame's room travels as sealed memory, intact")
    func frameSizeLimit() throws {
        #expect(MessagePort.maximumFrameSize == 65536)
        let receiver = try ReceivingPort(name: "backpressure-size")
        defer { receiver.stop() }
        let proxy = try MessagePort(sendRight: receiver.port.makeSendRight())

        // Larger than a frame (16 header + 8 table + 65513 = 65537 bytes), or two that do not
        // fit one together: sealed memory since §2g, not an error.
        try proxy.send(msgid: 1, components: [.data(Data(count: 65513))], timeout: waitLimit)
        try proxy.send(msgid: 2, components: [.data(Data(count: 70_000))], timeout: waitLimit)
        try proxy.send(msgid: 3, components: [.data(Data(repeating: 1, count: 30_000)), .data(Data(repeating: 2, count: 30_000)),
                                              .data(Data(repeating: 3, count: 30_000))], timeout: waitLimit)
        // 65 components: over the component limit, whatever the size.
        #expect(throws: PortError.messageTooLarge(limit: 65536)) {
            try proxy.send(msgid: 4, components: Array(repeating: .data(Data()), count: 65), timeout: waitLimit)
        }
        // The connection is unaffected, and a frame of exactly 65536 bytes goes through.
        var big = Data(count: 65512)
        for index in big.indices { big[index] = UInt8(truncatingIfNeeded: index &* 31 &+ 7) }
        try proxy.send(msgid: 5, components: [.data(big)], timeout: waitLimit)
        try proxy.send(msgid: 6, components: Array(repeating: .data(Data([1])), count: 64), timeout: waitLimit)
        let messages = try #require(receiver.waitForMessages(5))
        #expect(messages.map(\.msgid) == [1, 2, 3, 5, 6])
        #expect(messages[0].data == Data(count: 65513))
        #expect(messages[1].data == Data(count: 70_000))
        let three = messages[2].components.map { if case .data(let data) = $0 { data } else { Data() } }
        #expect(three == [Data(repeating: 1, count: 30_000), Data(repeating: 2, count: 30_000), Data(repeating: 3, count: 30_000)])
        #expect(three.map(SealedMemory.contains) == [false, false, true], "the third does not fit the frame's room")
        #expect(messages[3].data == big)
        #expect(MessagePort.inlineDataLimit == big.count)
        #expect(!SealedMemory.contains(messages[3].data!), "a Data of inlineDataLimit bytes travels inline")
        #expect(SealedMemory.contains(messages[0].data!), "one byte more, as sealed memory")
        #expect(messages[4].components.count == 64)
        #expect(receiver.errors.value.isEmpty)
        #expect(proxy.isValid)
    }

    @Test("frames that cannot be read (no receiver, then a full queue) wake the sleeping loop at most once, and arrive in order once they can")
    func unreadableConnectionsDoNotSpin() throws {
        // Connections are level-triggered: one the loop cannot read yet must be parked, or its
        // readiness would end every sleep. Counted as passes that slept, on a loop whose only
        // activity is this port.
        let port = try MessagePort(queueLimit: 4)
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let sleeps = Shared(0)
        let received = Shared<[UInt32]>([])
        let thread = ResidentThread(name: "backpressure-parking")
        defer { port.invalidate(); proxy.invalidate(); thread.stop() }
        thread.runLoop.add(RunLoopObserver(activities: .afterWaiting) { _, _ in sleeps.update { $0 += 1 } },
                           forMode: .default)
        thread.runLoop.add(port, forMode: .default)
        // Four local messages fill the queue; eight frames wait behind them in the socket.
        for msgid in 0..<4 { try port.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
        for msgid in 4..<12 { try proxy.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
        #expect(waitUntil { thread.runLoop.isWaiting })
        let before = sleeps.value
        // Long enough for a spinning loop to go round many thousand times.
        try thread.perform(waitUntilDone: true) {}
        usleep(200_000)
        #expect(thread.runLoop.isWaiting)
        #expect(sleeps.value - before <= 2, "the loop woke \(sleeps.value - before) times with unreadable frames waiting")

        port.setHandler { message in received.update { $0.append(message.msgid) } }
        #expect(waitUntil { received.value.count == 12 }, "delivered \(received.value)")
        #expect(received.value == Array(0..<12))
        #expect(port.connectionCount == 1)
    }

    @Test("§3.10 frames wait without waking the loop while it runs a mode without their port, then arrive in order in the port's mode")
    func framesWaitForTheirMode() throws {
        let port = try MessagePort()
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let received = Shared<[UInt32]>([])
        port.setHandler { message in received.update { $0.append(message.msgid) } }
        let thread = ResidentThread(name: "frames-wait-for-mode")
        defer { port.invalidate(); proxy.invalidate(); thread.stop() }
        let outcome = Shared<(RunLoopKit.ThreadRunLoop.RunResult, [UInt32], Int, [UInt32])?>(nil)
        try thread.perform(waitUntilDone: true) {
            let loop = ThreadRunLoop.current
            let wakeUps = Shared(0)
            loop.add(port, forMode: "P")
            loop.add(RunLoopSource { }, forMode: "Q")
            loop.add(RunLoopObserver(activities: .afterWaiting) { _, _ in wakeUps.update { $0 += 1 } }, forMode: "Q")
            for msgid: UInt32 in 1...3 { try? proxy.send(msgid: msgid, timeout: .seconds(5)) }
            let inQ = loop.run(mode: "Q", for: .milliseconds(300), returnAfterSourceHandled: false)
            let seenInQ = received.value
            for _ in 0..<3 { loop.run(mode: "P", for: .seconds(5), returnAfterSourceHandled: true) }
            outcome.update { $0 = (inQ, seenInQ, wakeUps.value, received.value) }
        }
        let (inQ, seenInQ, wakeUps, seenInP) = try #require(outcome.value)
        #expect(inQ == .timedOut)
        #expect(seenInQ == [])
        // At most the wake-up for the run's own deadline.
        #expect(wakeUps <= 1, "the loop woke \(wakeUps) times in mode Q")
        #expect(seenInP == [1, 2, 3])
    }
}

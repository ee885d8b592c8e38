// Guarantees §3.22 (`messages()`) and §3.23 (`send(…) async`).

import FoundationEssentials
import Glibc
import RunLoopKit
import Synchronization
import Testing

private let underSanitizer = environment("RUNLOOPKIT_SANITIZER") != nil

/// A message from sender `sender` with sequence number `sequence`, as 16 bytes of DATA.
private func tagged(_ sender: Int, _ sequence: Int) -> [MessagePort.Message.Component] {
    var words = [UInt64(sender), UInt64(sequence)]
    return [.data(Data(bytes: &words, count: 16))]
}

private func tag(of message: MessagePort.Message) -> (sender: Int, sequence: Int)? {
    guard let data = message.data, data.count == 16 else { return nil }
    let words = data.withUnsafeBytes { Array($0.bindMemory(to: UInt64.self)) }
    return (Int(words[0]), Int(words[1]))
}

/// Checks that every (sender, sequence) arrived exactly once and in order per sender.
private struct ExactlyOnceInOrder {
    var next: [Int]
    var violations = 0
    init(senders: Int) { next = Array(repeating: 0, count: senders) }
    mutating func record(_ message: MessagePort.Message) {
        guard let (sender, sequence) = tag(of: message), next.indices.contains(sender), next[sender] == sequence else {
            violations += 1
            return
        }
        next[sender] += 1
    }
}

/// Takes up to `count` messages from `messages`, giving up (by cancelling the consuming task,
/// which ends its loop) after `timeout`: a broken port fails the test instead of hanging it.
private func receive(_ count: Int, from messages: MessagePort.Messages,
                     within timeout: Duration = .seconds(60)) async -> [MessagePort.Message] {
    let consumer = Task { () -> [MessagePort.Message] in
        var received: [MessagePort.Message] = []
        for await message in messages {
            received.append(message)
            if received.count == count { break }
        }
        return received
    }
    let hangGuard = Task {
        try await Task.sleep(for: timeout)
        consumer.cancel()
    }
    defer { hangGuard.cancel() }
    return await consumer.value
}

/// A port (queue limit 4) on a resident thread's loop, and a proxy of it in this process whose
/// frames that loop reads.
private func portWithSendRightOnAThread(_ name: String) throws -> (MessagePort, MessagePort, ResidentThread) {
    let port = try MessagePort(queueLimit: 4)
    let proxy = try MessagePort(sendRight: port.makeSendRight())
    let thread = ResidentThread(name: uniqueThreadName(name))
    thread.runLoop.add(port, forMode: .default)
    return (port, proxy, thread)
}

@Suite("§3.22 messages()")
struct PortMessagesSequenceTests {

    @Test("§3.22 4 sender threads × 50,000 messages consumed by for await: each exactly once, per-sender order kept, no run loop")
    func fourSendersExactlyOnceInOrder() async throws {
        let perSender = underSanitizer ? 2_000 : 50_000
        let port = try MessagePort(queueLimit: 64)
        let messages = port.messages()
        for sender in 0..<4 {
            startThread {
                for sequence in 0..<perSender {
                    try? port.send(msgid: UInt32(sender), components: tagged(sender, sequence), timeout: .seconds(60))
                }
            }
        }
        var check = ExactlyOnceInOrder(senders: 4)
        let received = await receive(4 * perSender, from: messages)
        for message in received { check.record(message) }
        #expect(received.count == 4 * perSender)
        #expect(check.violations == 0)
        #expect(check.next == Array(repeating: perSender, count: 4))
        #expect(port.queuedCount == 0)
    }

    @Test("§3.22 a consumer that pauses: sync senders block and async senders suspend at queueLimit; both resume when it goes on")
    func backpressureIsEndToEnd() async throws {
        let limit = 8
        let port = try MessagePort(queueLimit: limit)
        let syncSent = Counter(), asyncSent = Counter()
        startThread {
            for sequence in 0..<20 {
                if (try? port.send(msgid: 0, components: tagged(0, sequence), timeout: .seconds(60))) != nil { syncSent.increment() }
            }
        }
        let asyncSender = Task {
            for sequence in 0..<20 {
                try await port.send(msgid: 1, components: tagged(1, sequence))
                asyncSent.increment()
            }
        }
        #expect(await eventually { port.queuedCount == limit })
        await settleAsync()
        // Paused: the queue holds exactly its limit, and neither sender went past it.
        #expect(port.queuedCount == limit)
        #expect(syncSent.current + asyncSent.current == limit)
        var check = ExactlyOnceInOrder(senders: 2)
        let received = await receive(40, from: port.messages())
        for message in received { check.record(message) }
        try await asyncSender.value
        #expect(received.count == 40)
        #expect(check.violations == 0)
        #expect(syncSent.current == 20 && asyncSent.current == 20)
    }

    @Test("§3.22 cancelling the consuming task ends the loop; the port stays valid and its queued messages wait for the next consumer")
    func cancellationEndsTheConsumerNotThePort() async throws {
        let port = try MessagePort()
        let started = Flag()
        let consumer = Task { () -> Int in
            var count = 0
            started.set()
            for await _ in port.messages() { count += 1 }
            return count
        }
        #expect(await eventually { started.isSet })
        await settleAsync()
        consumer.cancel()
        #expect(await consumer.value == 0)
        #expect(port.isValid)
        try port.send(msgid: 7, timeout: waitLimit)
        try port.send(msgid: 8, timeout: waitLimit)
        #expect(port.queuedCount == 2)
        var iterator = port.messages().makeAsyncIterator()
        #expect(await iterator.next()?.msgid == 7)
        #expect(await iterator.next()?.msgid == 8)
    }

    @Test("§3.22 invalidation ends the loop: next() returns nil, queued messages are discarded and counted")
    func invalidationEndsTheSequence() async throws {
        let port = try MessagePort()
        try port.send(msgid: 1, timeout: waitLimit)
        try port.send(msgid: 2, timeout: waitLimit)
        var iterator = port.messages().makeAsyncIterator()
        #expect(await iterator.next()?.msgid == 1)
        port.invalidate()
        #expect(await iterator.next() == nil)
        #expect(port.discardedCount == 1)

        // A consumer suspended on an empty port is resumed with nil.
        let other = try MessagePort()
        let waiting = Task { () -> UInt32? in
            var iterator = other.messages().makeAsyncIterator()
            return await iterator.next()?.msgid
        }
        await settleAsync()
        other.invalidate()
        #expect(await waiting.value == nil)
    }

    @Test("§3.22 setting a handler later finishes the sequence, and the handler gets what follows")
    func handlerFinishesTheSequence() async throws {
        let port = try MessagePort()
        let consumer = Task { () -> [UInt32] in
            var seen: [UInt32] = []
            for await message in port.messages() { seen.append(message.msgid) }
            return seen
        }
        try port.send(msgid: 1, timeout: waitLimit)
        #expect(await eventually { port.queuedCount == 0 })
        let handled = Recorder<UInt32>()
        let looper = LoopThread { loop -> RLResult in
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(looper.waitUntilSleeping())
        port.setHandler { handled.append($0.msgid) }
        #expect(await consumer.value == [1])
        try port.send(msgid: 2, timeout: waitLimit)
        #expect(looper.join() == .handledSource)
        #expect(handled.values == [2])
        port.invalidate()
    }

    @Test("§3.22 frames from a send right are read by the port's loop into the sequence")
    func framesReachTheSequenceThroughTheLoop() async throws {
        let (port, proxy, thread) = try portWithSendRightOnAThread("seq-x")
        defer { thread.stop() }
        let count = 50
        let failures = Recorder<PortError>()
        startThread {
            for sequence in 0..<count {
                do throws(PortError) {
                    try proxy.send(msgid: 0, components: tagged(0, sequence), timeout: .seconds(60))
                } catch {
                    failures.append(error)
                }
            }
        }
        var check = ExactlyOnceInOrder(senders: 1)
        let received = await receive(count, from: port.messages())
        for message in received { check.record(message) }
        #expect(received.count == count, "queued \(port.queuedCount), connections \(port.connectionCount), \(port), loop: \(thread.runLoop.debugDescription)")
        #expect(failures.values.isEmpty)
        #expect(check.violations == 0)
        proxy.invalidate()
        port.invalidate()
    }

    @Test("§3.22 frames that reached the port's loop before any consumer are read once messages() is called")
    func framesWaitingForAConsumerAreReadWhenItArrives() async throws {
        let (port, proxy, thread) = try portWithSendRightOnAThread("seq-w")
        defer { thread.stop() }
        for sequence in 0..<10 { try proxy.send(msgid: 0, components: tagged(0, sequence), timeout: waitLimit) }
        // The loop has seen the frames and, with no receiver, left them where they are.
        #expect(await eventually { thread.runLoop.isWaiting })
        await settleAsync()
        var check = ExactlyOnceInOrder(senders: 1)
        let received = await receive(10, from: port.messages(), within: waitLimit)
        for message in received { check.record(message) }
        #expect(received.count == 10)
        #expect(check.violations == 0)
        proxy.invalidate()
        port.invalidate()
    }
}

@Suite("§3.23 send(…) async")
struct PortAsyncSendTests {

    @Test("§3.23 a full queue suspends the task; it resumes when there is room, in order")
    func suspendsUntilRoom() async throws {
        let port = try MessagePort(queueLimit: 2)
        try await port.send(msgid: 0)
        try await port.send(msgid: 1)
        let third = Task { try await port.send(msgid: 2) }
        await settleAsync()
        #expect(port.queuedCount == 2)
        var iterator = port.messages().makeAsyncIterator()
        #expect(await iterator.next()?.msgid == 0)
        try await third.value
        #expect(await iterator.next()?.msgid == 1)
        #expect(await iterator.next()?.msgid == 2)
    }

    /// An async send of `msgid` in a task of its own; the task's value is the error it threw.
    private func sendingTask(_ port: MessagePort, _ msgid: UInt32) -> Task<PortError?, Never> {
        Task {
            do throws(PortError) { try await port.send(msgid: msgid) } catch { return error }
            return nil
        }
    }

    @Test("§3.23 invalidated while waiting: .invalidPort; cancelled while waiting: .cancelled and nothing queued")
    func invalidationAndCancellationWhileWaiting() async throws {
        let port = try MessagePort(queueLimit: 1)
        try await port.send(msgid: 0)
        let cancelled = sendingTask(port, 1)
        await settleAsync()
        cancelled.cancel()
        #expect(await cancelled.value == .cancelled)
        #expect(port.queuedCount == 1)

        let invalidated = sendingTask(port, 2)
        await settleAsync()
        port.invalidate()
        #expect(await invalidated.value == .invalidPort)
        #expect(await sendingTask(port, 3).value == .invalidPort)
    }

    @Test("§3.23 1,000 tasks suspended on one full port hold no thread: the cooperative pool still runs other work")
    func suspendedSendersHoldNoThread() async throws {
        let port = try MessagePort(queueLimit: 1)
        try await port.send(msgid: 0)
        let senders = 1_000
        let sent = Counter()
        let group = Task {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<senders {
                    group.addTask {
                        if (try? await port.send(msgid: UInt32(index + 1))) != nil { sent.increment() }
                    }
                }
            }
        }
        await settleAsync()
        #expect(sent.current == 0)
        // Work that needs the cooperative pool still runs while the senders wait.
        let otherWork = await withTaskGroup(of: Int.self) { group in
            for value in 0..<100 { group.addTask { value } }
            return await group.reduce(0, +)
        }
        #expect(otherWork == 4950)
        let received = Set(await receive(senders + 1, from: port.messages()).map(\.msgid))
        await group.value
        #expect(received == Set(0...UInt32(senders)))
        #expect(sent.current == senders)
    }

    @Test("§3.23 the async send through a proxy delivers in order")
    func asyncSendThroughAProxy() async throws {
        let port = try MessagePort()
        let proxy = try MessagePort(sendRight: port.makeSendRight())
        let received = Recorder<UInt32>()
        let thread = ResidentThread(name: uniqueThreadName("async-x"))
        defer { thread.stop() }
        port.setHandler { received.append($0.msgid) }
        thread.runLoop.add(port, forMode: .default)
        for msgid in 0..<2_000 as Range<UInt32> { try await proxy.send(msgid: msgid, components: [.data(Data(count: 512))]) }
        #expect(await eventually { received.count == 2_000 })
        #expect(received.values == Array(0..<2_000))
        proxy.invalidate()
        port.invalidate()
    }
}

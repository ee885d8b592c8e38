// The port's lock-free inbox and batch delivery: senders claim slots without a lock, the
// receiving loop takes everything queued at once, and a batch handler takes a pass's messages in
// one call (Guarantees §3.16, §3.22–23 under the new queue; `setBatchHandler`).

import FoundationEssentials
import Glibc
import RunLoopKit
import Synchronization
import Testing

private let underSanitizer = environment("RUNLOOPKIT_SANITIZER") != nil

/// msgid of sender `sender`'s message number `sequence`.
private func msgid(_ sender: Int, _ sequence: Int) -> UInt32 { UInt32(sender) << 24 | UInt32(sequence) }

/// Per-sender order, checked as messages arrive: each sender's messages once each, in the order
/// sent (msgid = sender << 24 | sequence, and a DATA component repeating the msgid).
private final class PerSenderOrder: Sendable {
    private struct State {
        var next: [Int]
        var total = 0
        var problems: [String] = []
    }
    private let state: PLocked<State>
    init(senders: Int) { state = PLocked(State(next: Array(repeating: 0, count: senders))) }

    /// Returns the running total.
    @discardableResult
    func record(_ message: MessagePort.Message) -> Int {
        let sender = Int(message.msgid >> 24), sequence = Int(message.msgid & 0xFF_FFFF)
        let payloadOK = message.data.map { $0.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } == message.msgid } ?? false
        return state.withLock { s in
            if !s.next.indices.contains(sender) || s.next[sender] != sequence || !payloadOK {
                if s.problems.count < 5 {
                    s.problems.append("sender \(sender): got \(sequence), expected \(s.next.indices.contains(sender) ? s.next[sender] : -1), payload \(payloadOK)")
                }
            } else {
                s.next[sender] += 1
            }
            s.total += 1
            return s.total
        }
    }
    var total: Int { state.withLock { $0.total } }
    var next: [Int] { state.withLock { $0.next } }
    var problems: [String] { state.withLock { $0.problems } }
}

private func components(_ id: UInt32) -> [MessagePort.Message.Component] {
    var word = id
    return [.data(Data(bytes: &word, count: 4))]
}

/// How the receiving side takes its messages.
enum ReceiverKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case handler, delegate, batchHandler
    var testDescription: String { rawValue }
}

private final class ForwardingDelegate: MessagePort.Delegate {
    let body: @Sendable (MessagePort.Message) -> Void
    init(_ body: @escaping @Sendable (MessagePort.Message) -> Void) { self.body = body }
    func handlePortMessage(_ message: MessagePort.Message) { body(message) }
}

/// Sets `kind` of receiver on `port`, calling `body` once per message; returns what must be kept
/// alive (a delegate is held weakly).
private func receive(on port: MessagePort, as kind: ReceiverKind,
                     _ body: @escaping @Sendable (MessagePort.Message) -> Void) -> AnyObject? {
    switch kind {
    case .handler:
        port.setHandler(body)
        return nil
    case .delegate:
        let delegate = ForwardingDelegate(body)
        port.delegate = delegate
        return delegate
    case .batchHandler:
        port.setBatchHandler { batch in
            while let message = batch.next() { body(message) }
        }
        return nil
    }
}

@Suite("Port inbox and batch delivery")
struct PortInboxTests {

    @Test("§3.16 four threads sending at once into a small queue: each thread's messages arrive once each, in the order it sent them",
          arguments: ReceiverKind.allCases)
    func fourContendingSendersKeepTheirOrder(_ kind: ReceiverKind) throws {
        // Seven: not a power of two, so the ring has more slots than the queue holds, and the
        // senders block and are woken thousands of times while the ring laps.
        let port = try MessagePort(queueLimit: 7)
        let senders = 4, perSender = underSanitizer ? 3_000 : 40_000
        let order = PerSenderOrder(senders: senders)
        let thread = ResidentThread(name: uniqueThreadName("inbox-order"))
        defer { thread.stop() }
        let keep = receive(on: port, as: kind) { order.record($0) }
        thread.runLoop.add(port, forMode: .default)
        let failures = Recorder<String>()
        let finished = Counter()
        for sender in 0..<senders {
            startThread {
                for sequence in 0..<perSender {
                    let id = msgid(sender, sequence)
                    do throws(PortError) {
                        try port.send(msgid: id, components: components(id), timeout: .seconds(120))
                    } catch {
                        failures.append("sender \(sender) message \(sequence): \(error)")
                        break
                    }
                }
                finished.increment()
            }
        }
        #expect(waitUntil(timeout: .seconds(600)) { finished.current == senders && order.total == senders * perSender })
        #expect(failures.values.isEmpty, "\(failures.values.prefix(3))")
        #expect(order.problems.isEmpty, "\(order.problems)")
        #expect(order.next == Array(repeating: perSender, count: senders))
        #expect(order.total == senders * perSender)
        let statistics = port.statistics
        #expect(statistics.sent == UInt64(senders * perSender))
        #expect(waitUntil { port.statistics.delivered == UInt64(senders * perSender) })
        #expect(statistics.queueHighWater <= 7)
        #expect(port.queuedCount == 0)
        withExtendedLifetime(keep) {}
        port.invalidate()
    }

    @Test("§3.16 §3.23 a full queue holds its senders: blocked threads and suspended tasks wait, then all get in, each in its order, once the receiver takes")
    func fullQueueHoldsBlockedAndSuspendedSenders() async throws {
        let limit = 4, perSender = 6
        let port = try MessagePort(queueLimit: limit)
        // Sender 0 fills the queue; senders 1 and 2 are threads, 3 and 4 tasks.
        for sequence in 0..<limit { try port.send(msgid: msgid(0, sequence), components: components(msgid(0, sequence)), timeout: .zero) }
        let failures = Recorder<String>()
        let done = Counter()
        for sender in 1...2 {
            startThread {
                for sequence in 0..<perSender {
                    let id = msgid(sender, sequence)
                    do throws(PortError) {
                        try port.send(msgid: id, components: components(id), timeout: .seconds(120))
                    } catch { failures.append("thread \(sender): \(error)") }
                }
                done.increment()
            }
        }
        let tasks = (3...4).map { sender in
            Task {
                for sequence in 0..<perSender {
                    let id = msgid(sender, sequence)
                    do throws(PortError) {
                        try await port.send(msgid: id, components: components(id))
                    } catch { failures.append("task \(sender): \(error)") }
                }
                done.increment()
            }
        }
        // Each of the four waits on its first message: counted once each.
        #expect(await eventually { port.statistics.sendersBlocked == 4 }, "the senders did not all wait")
        await settleAsync()
        let held = port.statistics
        #expect(held.sent == UInt64(limit), "a sender got past the full queue")
        #expect(port.queuedCount == limit)
        #expect(done.current == 0)

        let order = PerSenderOrder(senders: 5)
        let thread = ResidentThread(name: uniqueThreadName("inbox-full"))
        defer { thread.stop() }
        port.setHandler { order.record($0) }
        thread.runLoop.add(port, forMode: .default)
        let total = limit + 4 * perSender
        #expect(await eventually { order.total == total && done.current == 4 })
        for task in tasks { await task.value }
        #expect(failures.values.isEmpty, "\(failures.values)")
        #expect(order.problems.isEmpty, "\(order.problems)")
        #expect(order.next == [limit] + Array(repeating: perSender, count: 4))
        #expect(port.statistics.queueHighWater == limit)
        port.invalidate()
    }

    @Test("§3.16 invalidated in the middle of a batch: nothing is delivered after, the rest is discarded and counted, blocked senders get .invalidPort or were counted",
          arguments: [ReceiverKind.handler, .batchHandler])
    func invalidationMidBatchDiscardsTheRest(_ kind: ReceiverKind) throws {
        let limit = 8
        let port = try MessagePort(queueLimit: limit)
        for sequence in 0..<limit { try port.send(msgid: msgid(0, sequence), components: components(msgid(0, sequence)), timeout: .zero) }
        let outcomes = Recorder<SendOutcome>()
        for sender in 1...2 {
            startThread {
                do throws(PortError) {
                    try port.send(msgid: msgid(sender, 0), components: components(msgid(sender, 0)), timeout: .seconds(120))
                    outcomes.append(.sent)
                } catch { outcomes.append(.failed(error)) }
            }
        }
        #expect(waitUntil { port.statistics.sendersBlocked == 2 })
        let delivered = Recorder<UInt32>()
        let deliveredAfterInvalidation = Counter()
        let thread = ResidentThread(name: uniqueThreadName("inbox-invalidate"))
        defer { thread.stop() }
        let keep = receive(on: port, as: kind) { message in
            if !port.isValid { deliveredAfterInvalidation.increment() }
            delivered.append(message.msgid)
            // The third message of the batch: the blocked senders may be in by now, or not.
            if delivered.count == 3 { port.invalidate() }
        }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { outcomes.count == 2 && !port.isValid })
        // The handler invalidated the port in the middle of its callout; a batch counts what it
        // delivered and discarded when that callout returns, so the counts are read after it.
        try thread.perform(waitUntilDone: true) {}
        let statistics = port.statistics
        #expect(delivered.values == (0..<3).map { msgid(0, $0) })
        #expect(deliveredAfterInvalidation.current == 0)
        #expect(statistics.delivered == 3)
        let gotIn = outcomes.values.filter { $0 == .sent }.count
        #expect(outcomes.values.allSatisfy { $0 == .sent || $0 == .failed(.invalidPort) }, "\(outcomes.values)")
        #expect(statistics.sent == UInt64(limit + gotIn))
        #expect(statistics.discarded == statistics.sent - 3)
        #expect(port.discardedCount == Int(statistics.discarded))
        #expect(port.queuedCount == 0)
        withExtendedLifetime(keep) {}
    }

    @Test("§3.16 a queue limit too large for its ring: sends throw .resourceExhausted(ENOMEM), nothing is queued, the port stays usable")
    func queueLimitTooLargeForItsRing() async throws {
        let port = try MessagePort(queueLimit: .max)
        #expect(throws: PortError.resourceExhausted(errno: ENOMEM)) { try port.send(msgid: 1, timeout: .zero) }
        await #expect(throws: PortError.resourceExhausted(errno: ENOMEM)) { try await port.send(msgid: 2) }
        #expect(port.queuedCount == 0)
        #expect(port.statistics.sent == 0)
        #expect(port.isValid)
        port.invalidate()
        #expect(throws: PortError.invalidPort) { try port.send(msgid: 3, timeout: .zero) }
    }

    @Test("batch handler: one call takes every message a pass found, in the order sent, each the handler's to keep")
    func batchHandlerTakesAPassInOneCall() throws {
        let port = try MessagePort()
        for sequence in 0..<10 { try port.send(msgid: msgid(0, sequence), components: components(msgid(0, sequence)), timeout: .zero) }
        let batches = Recorder<[MessagePort.Message]>()
        port.setBatchHandler { batch in
            var messages: [MessagePort.Message] = []
            while let message = batch.next() { messages.append(message) }
            batches.append(messages)
        }
        let thread = ResidentThread(name: uniqueThreadName("inbox-batch"))
        defer { thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { port.statistics.delivered == 10 })
        let kept = batches.values
        #expect(kept.count == 1, "\(kept.map(\.count))")
        // Kept past the call: the messages, their Data included, are the handler's.
        #expect(kept.first?.map(\.msgid) == (0..<10).map { msgid(0, $0) })
        #expect(kept.first?.allSatisfy { $0.data.map { $0.withUnsafeBytes { $0.loadUnaligned(as: UInt32.self) } } == $0.msgid } == true)
        port.invalidate()
    }

    @Test("batch handler: messages it leaves stay queued, first in line, and are handed to it in the next pass")
    func batchHandlerLeavesMessagesQueued() throws {
        let port = try MessagePort()
        for sequence in 0..<10 { try port.send(msgid: UInt32(sequence), timeout: .zero) }
        let sizes = Recorder<Int>()
        let order = Recorder<UInt32>()
        port.setBatchHandler { batch in
            var taken = 0
            while taken < 3, let message = batch.next() {
                order.append(message.msgid)
                taken += 1
            }
            sizes.append(taken)
        }
        let thread = ResidentThread(name: uniqueThreadName("inbox-leave"))
        defer { thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        #expect(waitUntil { order.count == 10 })
        #expect(order.values == Array(0..<10))
        #expect(sizes.values == [3, 3, 3, 1])
        #expect(port.queuedCount == 0)
        port.invalidate()
    }

    @Test("§3.16 batch handler: a run that returns after one handled source gets a batch of one message")
    func batchHandlerGetsOneMessagePerHandledSourceStep() throws {
        let r = try #require(onLoopThread { loop -> ([Int], [RLResult], [Int]) in
            let port = try! MessagePort()
            let sizes = Recorder<Int>()
            port.setBatchHandler { batch in
                var taken = 0
                while batch.next() != nil { taken += 1 }
                sizes.append(taken)
            }
            loop.add(port, forMode: .default)
            for id: UInt32 in 1...3 { try! port.send(msgid: id, timeout: .zero) }
            var results: [RLResult] = [], queued: [Int] = []
            for _ in 0..<3 {
                results.append(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))
                queued.append(port.queuedCount)
            }
            port.invalidate()
            return (sizes.values, results, queued)
        })
        #expect(r.0 == [1, 1, 1])
        #expect(r.1 == [.handledSource, .handledSource, .handledSource])
        #expect(r.2 == [2, 1, 0])
    }

    @Test("batch handler takes precedence over a handler and a delegate; cleared, the handler gets what follows")
    func batchHandlerTakesPrecedence() throws {
        let port = try MessagePort()
        let byBatch = Recorder<UInt32>(), byHandler = Recorder<UInt32>(), byDelegate = Recorder<UInt32>()
        let delegate = ForwardingDelegate { byDelegate.append($0.msgid) }
        port.delegate = delegate
        port.setHandler { byHandler.append($0.msgid) }
        port.setBatchHandler { batch in
            while let message = batch.next() { byBatch.append(message.msgid) }
        }
        let thread = ResidentThread(name: uniqueThreadName("inbox-precedence"))
        defer { thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        for id: UInt32 in 0..<3 { try port.send(msgid: id, timeout: .seconds(5)) }
        #expect(waitUntil { byBatch.count == 3 })
        port.setBatchHandler(nil)
        for id: UInt32 in 3..<5 { try port.send(msgid: id, timeout: .seconds(5)) }
        #expect(waitUntil { byHandler.count == 2 })
        #expect(byBatch.values == [0, 1, 2])
        #expect(byHandler.values == [3, 4])
        #expect(byDelegate.values.isEmpty)
        withExtendedLifetime(delegate) {}
        port.invalidate()
    }

    @Test("§3.16 §3.7 a batch handler that runs the loop again: the nested pass continues its batch, and order per sender holds")
    func nestedRunInBatchHandlerKeepsOrder() throws {
        let (order, calls) = try #require(onLoopThread { loop -> ([UInt32], Int) in
            let port = try! MessagePort()
            let got = Recorder<UInt32>()
            let calls = Counter()
            port.setBatchHandler { batch in
                calls.increment()
                while let message = batch.next() {
                    got.append(message.msgid)
                    if got.count == 11 { loop.stop() }
                    guard message.msgid == 0 else { continue }
                    // Queued behind 1…9, which this batch already took.
                    try? port.send(msgid: 10, timeout: .seconds(5))
                    for _ in 0..<3 { loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) }
                }
            }
            loop.add(port, forMode: .default)
            for msgid in 0..<10 { try! port.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
            loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
            port.invalidate()
            return (got.values, calls.current)
        })
        #expect(order == Array(0...10))
        // The outer batch, three nested batches of one, and one more for message 10.
        #expect(calls == 5)
    }

    @Test("§3.16 frames and threads racing into a small queue: every message arrives once, in each sender's order")
    func framesAndLocalSendersShareTheQueue() throws {
        let port = try MessagePort(queueLimit: 2)
        let proxies = try (0..<2).map { _ in try MessagePort(sendRight: port.makeSendRight()) }
        let senders = 4, perSender = underSanitizer ? 1_000 : 10_000
        let order = PerSenderOrder(senders: senders)
        let thread = ResidentThread(name: uniqueThreadName("inbox-frames"))
        defer { thread.stop() }
        port.setHandler { order.record($0) }
        thread.runLoop.add(port, forMode: .default)
        let failures = Recorder<String>()
        for sender in 0..<senders {
            // Senders 0 and 1 write frames through send rights; 2 and 3 queue directly.
            let target = sender < 2 ? proxies[sender] : port
            startThread {
                for sequence in 0..<perSender {
                    let id = msgid(sender, sequence)
                    do throws(PortError) {
                        try target.send(msgid: id, components: components(id), timeout: .seconds(120))
                    } catch {
                        failures.append("sender \(sender) message \(sequence): \(error)")
                        break
                    }
                }
            }
        }
        #expect(waitUntil(timeout: .seconds(600)) { order.total == senders * perSender || !failures.values.isEmpty })
        #expect(failures.values.isEmpty, "\(failures.values.prefix(3))")
        #expect(order.problems.isEmpty, "\(order.problems)")
        #expect(order.next == Array(repeating: perSender, count: senders))
        #expect(waitUntil { port.statistics.delivered == UInt64(senders * perSender) })
        #expect(port.statistics.sent == UInt64(senders * perSender))
        for proxy in proxies { proxy.invalidate() }
        port.invalidate()
    }
}

// Guarantees §3.16: MessagePort — bounded queue, invalidation, ordering, delivery.

import FoundationEssentials
import Glibc
import RunLoopKit
import Synchronization
import Testing

/// A delegate that records what it receives (and on which thread).
final class RecordingDelegate: MessagePort.Delegate {
    let received = Recorder<(UInt32, pthread_t)>()
    init() {}
    func handlePortMessage(_ message: MessagePort.Message) {
        received.append((message.msgid, pthread_self()))
    }
}

enum SendOutcome: Equatable, Sendable {
    case sent
    case failed(PortError)
}

/// A loop thread that holds `port` in `mode` (handler: record the msgid). It starts
/// running that mode once `runWhen` is set (at once if nil) and runs until stopped.
/// Returns after the port was added to the loop.
private func receiverThread(port: MessagePort, mode: RLMode = .default,
                            runWhen go: Flag? = nil,
                            record: Recorder<UInt32>) -> LoopThread<RLResult> {
    let added = Flag()
    let lt = LoopThread { loop -> RLResult in
        port.setHandler { record.append($0.msgid) }
        loop.add(port, forMode: mode)
        loop.add(keepAliveSource(), forMode: mode)
        added.set()
        if let go { _ = waitUntil(timeout: .seconds(120)) { go.isSet } }
        return loop.run(mode: mode, for: .seconds(60), returnAfterSourceHandled: false)
    }
    _ = waitUntil { added.isSet }
    return lt
}

@Suite("§3.16 MessagePort")
struct MessagePortTests {

    @Test("§3.16 queueLimit is reported; a new port is valid and empty")
    func newPortProperties() throws {
        let port = try MessagePort(queueLimit: 7)
        #expect(port.queueLimit == 7)
        #expect(port.isValid)
        #expect(port.queuedCount == 0)
        #expect(try MessagePort().queueLimit == 1024)
        let other = try MessagePort()
        #expect(port == port)
        #expect(port != other)
        #expect(Set([port, port, other]).count == 2)
        port.invalidate()
        other.invalidate()
    }

    @Test("§3.16 send never blocks while the queue is under queueLimit (even with a past deadline)")
    func sendDoesNotBlockUnderQueueLimit() throws {
        let port = try MessagePort(queueLimit: 8)
        let got = Recorder<UInt32>()
        let go = Flag()
        let lt = receiverThread(port: port, runWhen: go, record: got)  // holds the port, not running yet
        defer { go.set(); lt.loop.stop(); _ = lt.join(); port.invalidate() }
        let r = try #require(onFreshThread(timeout: .seconds(10)) { () -> ([Bool], Int) in
            var ok: [Bool] = []
            for id: UInt32 in 0..<8 {
                do {
                    try port.send(msgid: id, before: .now - .seconds(1))
                    ok.append(true)
                } catch { ok.append(false) }
            }
            return (ok, port.queuedCount)
        }, "send blocked under the queue limit")
        #expect(r.0 == Array(repeating: true, count: 8))
        #expect(r.1 == 8)
    }

    @Test("§3.16 when the queue is full, send blocks until there is space")
    func sendBlocksWhenFullUntilSpace() throws {
        let port = try MessagePort(queueLimit: 2)
        let got = Recorder<UInt32>()
        let go = Flag()
        let lt = receiverThread(port: port, runWhen: go, record: got)
        try port.send(msgid: 1, timeout: .seconds(5))
        try port.send(msgid: 2, timeout: .seconds(5))
        let sendResult = Ref<SendOutcome>()
        startThread {
            do throws(PortError) {
                try port.send(msgid: 3, timeout: .seconds(60))
                sendResult.value = .sent
            } catch { sendResult.value = .failed(error) }
        }
        settle()
        #expect(sendResult.value == nil, "send returned although the queue was full")
        go.set()  // the receiver starts draining: space appears
        #expect(waitUntil { sendResult.value != nil }, "the blocked sender was not released when space appeared")
        if case .failed(let e)? = sendResult.value { Issue.record("blocked send failed: \(e)") }
        #expect(waitUntil { got.count == 3 })
        #expect(got.values == [1, 2, 3])
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        port.invalidate()
    }

    @Test("§3.16 senders blocked on a full queue all get in after one take makes room, each woken sender waking the next")
    func blockedSendersAllGetInAfterOneTake() throws {
        let port = try MessagePort(queueLimit: 8)
        for msgid in 0..<8 { try port.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
        let sent = Counter()
        let failures = Recorder<PortError>()
        for sender in 0..<4 {
            startThread {
                do throws(PortError) {
                    // Longer than the first delivery waits for them: a sender left blocked while
                    // the queue has room must not get in at its deadline instead.
                    try port.send(msgid: UInt32(100 + sender), timeout: .seconds(120))
                    sent.increment()
                } catch { failures.append(error) }
            }
        }
        // Counted under the port's lock just before a sender waits: at 4, all four are waiting.
        #expect(waitUntil { port.statistics.sendersBlocked == 4 }, "the four senders did not block on the full queue")
        // The pass takes the eight queued messages at once, then the first delivery holds the loop
        // until the four senders are in: one take must let all four in, with no second take.
        let allInDuringFirstDelivery = Ref<Bool>()
        let delivered = Recorder<UInt32>()
        let lt = LoopThread { loop -> RLResult in
            port.setHandler { message in
                if delivered.count == 0 {
                    allInDuringFirstDelivery.value = waitUntil(timeout: .seconds(20)) { sent.current == 4 }
                }
                delivered.append(message.msgid)
                if delivered.count == 12 { loop.stop() }
            }
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .seconds(300), returnAfterSourceHandled: false)
        }
        #expect(lt.join(timeout: .seconds(300)) == .stopped)
        #expect(allInDuringFirstDelivery.value == true, "a sender stayed blocked while the queue had room")
        #expect(failures.values.isEmpty, "\(failures.values)")
        #expect(Array(delivered.values.prefix(8)) == Array(0..<8))
        #expect(Set(delivered.values.dropFirst(8)) == Set(100..<104))
        port.invalidate()
    }

    @Test("§3.16 send on a full queue with a past or zero deadline throws .timedOut at once")
    func sendPastDeadlineOnFullQueueTimesOut() throws {
        let port = try MessagePort(queueLimit: 1)
        try port.send(msgid: 1, timeout: .seconds(5))
        let r = try #require(onFreshThread(timeout: .seconds(10)) { () -> [PortError?] in
            var out: [PortError?] = []
            do throws(PortError) { try port.send(msgid: 2, before: .now - .seconds(1)); out.append(nil) }
            catch { out.append(error) }
            do throws(PortError) { try port.send(msgid: 3, timeout: .zero); out.append(nil) }
            catch { out.append(error) }
            return out
        }, "send with a past deadline on a full queue did not return")
        #expect(r == [.timedOut, .timedOut])
        #expect(port.queuedCount == 1)
        port.invalidate()
    }

    @Test("§3.16 send on a full queue waits until its deadline, then throws .timedOut")
    func sendOnFullQueueTimesOutAtDeadline() throws {
        let port = try MessagePort(queueLimit: 1)
        try port.send(msgid: 1, timeout: .seconds(5))
        let r = try #require(onFreshThread(timeout: .seconds(30)) { () -> (PortError?, Bool) in
            let deadline = ContinuousClock.now + .milliseconds(100)
            do throws(PortError) {
                try port.send(msgid: 2, before: deadline)
                return (nil, true)
            } catch {
                return (error, ContinuousClock.now >= deadline)
            }
        })
        #expect(r.0 == .timedOut)
        #expect(r.1, "send gave up before its deadline")
        port.invalidate()
    }

    @Test("§3.16 a sender blocked on a full queue gets .invalidPort promptly when the port is invalidated")
    func blockedSenderGetsInvalidPortOnInvalidate() throws {
        let port = try MessagePort(queueLimit: 1)
        try port.send(msgid: 1, timeout: .seconds(5))
        let outcome = Ref<SendOutcome>()
        startThread {
            do throws(PortError) {
                try port.send(msgid: 2, timeout: .seconds(120))
                outcome.value = .sent
            } catch { outcome.value = .failed(error) }
        }
        settle()  // let the sender block
        #expect(outcome.value == nil)
        port.invalidate()
        #expect(waitUntil { outcome.value != nil }, "the blocked sender hung after invalidate()")
        #expect(outcome.value == .failed(.invalidPort))
    }

    @Test("§3.16 sending to an invalidated port throws .invalidPort")
    func sendToInvalidatedPortThrowsInvalidPort() throws {
        let port = try MessagePort()
        port.invalidate()
        #expect(!port.isValid)
        #expect(throws: PortError.invalidPort) { try port.send(msgid: 1, timeout: .seconds(1)) }
        #expect(throws: PortError.invalidPort) { try port.send(msgid: 1, before: .now + .seconds(1)) }
        #expect(throws: PortError.invalidPort) { try port.send(msgid: 1, timeout: .zero) }
        port.invalidate()  // idempotent, no crash
        #expect(!port.isValid)
    }

    @Test("§3.16 messages from one thread arrive in the order sent")
    func messagesFromOneThreadArriveInOrder() throws {
        let port = try MessagePort()
        let got = Recorder<UInt32>()
        let lt = receiverThread(port: port, record: got)
        let senders: UInt32 = 3, perSender: UInt32 = 300
        for s in 0..<senders {
            startThread {
                for i in 0..<perSender { try? port.send(msgid: s << 16 | i, timeout: .seconds(60)) }
            }
        }
        #expect(waitUntil(timeout: .seconds(60)) { got.count == Int(senders * perSender) })
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        let values = got.values
        for s in 0..<senders {
            #expect(values.filter { $0 >> 16 == s }.map { $0 & 0xFFFF } == Array(0..<perSender))
        }
        port.invalidate()
    }

    @Test("§3.16 a queue longer than one pass's batch arrives whole and in order, with other sources run between passes")
    func longQueueSpansPassesInOrder() throws {
        let total = 2_500
        let (order, deliveredWhenSourceRan) = try #require(onLoopThread { loop -> ([UInt32], Int) in
            let port = try! MessagePort(queueLimit: total)
            let got = Recorder<UInt32>()
            let sourceSaw = Recorder<Int>()
            let source = RunLoopSource(perform: { sourceSaw.append(got.count) })
            port.setHandler { message in
                got.append(message.msgid)
                if message.msgid == 0 { source.signal() }
                if got.count == total { loop.stop() }
            }
            loop.add(source, forMode: .default)
            loop.add(port, forMode: .default)
            for msgid in 0..<total { try! port.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
            loop.run(mode: .default, for: .seconds(30), returnAfterSourceHandled: false)
            port.invalidate()
            return (got.values, sourceSaw.values.first ?? -1)
        })
        #expect(order == (0..<UInt32(total)).map { $0 })
        // The source signalled by the first message ran after that pass's batch and before the
        // queue was drained: a pass takes a bounded batch, however long the queue.
        #expect(deliveredWhenSourceRan > 0 && deliveredWhenSourceRan < total)
    }

    @Test("§3.16 §3.7 a handler that runs the loop again gets the rest of its own batch first: order per sender holds in nested runs")
    func nestedRunKeepsOrder() throws {
        let order = try #require(onLoopThread { loop -> [UInt32] in
            let port = try! MessagePort()
            let got = Recorder<UInt32>()
            port.setHandler { message in
                got.append(message.msgid)
                if got.count == 11 { loop.stop() }
                guard message.msgid == 0 else { return }
                // Queued behind 1…9, which the outer delivery has already taken as one batch.
                try? port.send(msgid: 10, timeout: .seconds(5))
                for _ in 0..<3 { loop.run(mode: .default, for: .seconds(5), returnAfterSourceHandled: true) }
            }
            loop.add(port, forMode: .default)
            for msgid in 0..<10 { try! port.send(msgid: UInt32(msgid), timeout: .seconds(5)) }
            // Not returning after each source: the outer pass delivers the ten as a batch.
            loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
            port.invalidate()
            return got.values
        })
        #expect(order == Array(0...10))
    }

    @Test("§3.16 delivery runs on the receiving loop's thread (handler and delegate)")
    func deliveryRunsOnReceivingLoopThread() throws {
        let handlerPort = try MessagePort()
        let delegatePort = try MessagePort()
        let delegate = RecordingDelegate()
        let handlerThreads = Recorder<Bool>()
        let lt = LoopThread { loop -> RLResult in
            let me = pthread_self()
            handlerPort.setHandler { _ in handlerThreads.append(isCurrentThread(me)) }
            delegatePort.delegate = delegate
            loop.add(handlerPort, forMode: .default)
            loop.add(delegatePort, forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping())
        for i: UInt32 in 0..<5 {
            try handlerPort.send(msgid: i, timeout: .seconds(5))
            try delegatePort.send(msgid: i, timeout: .seconds(5))
        }
        #expect(waitUntil { handlerThreads.count == 5 && delegate.received.count == 5 })
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        #expect(handlerThreads.values == Array(repeating: true, count: 5))
        let delegateThread = lt.threadID
        #expect(delegate.received.values.allSatisfy { pthread_equal($0.1, delegateThread) != 0 })
        #expect(delegate.received.values.map(\.0) == [0, 1, 2, 3, 4])
        withExtendedLifetime(delegate) {}
        handlerPort.invalidate()
        delegatePort.invalidate()
    }

    @Test("§3.16 one message per handled-source step")
    func oneMessagePerHandledSourceStep() throws {
        let r = try #require(onLoopThread { loop -> ([[UInt32]], [Int]) in
            let got = Recorder<UInt32>()
            let port = try! MessagePort()
            port.setHandler { got.append($0.msgid) }
            loop.add(port, forMode: .default)
            for id: UInt32 in 1...4 { try! port.send(msgid: id, timeout: .seconds(5)) }
            var snapshots: [[UInt32]] = [], queued: [Int] = []
            for _ in 0..<4 {
                _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
                snapshots.append(got.values)
                queued.append(port.queuedCount)
            }
            port.invalidate()
            return (snapshots, queued)
        })
        #expect(r.0 == [[1], [1, 2], [1, 2, 3], [1, 2, 3, 4]])
        #expect(r.1 == [3, 2, 1, 0])
    }

    @Test("§3.16 with no delegate and no handler, messages stay queued (none dropped) until a handler is set")
    func messagesStayQueuedWithoutHandlerUntilOneIsSet() throws {
        let r = try #require(onLoopThread { loop -> (Int, Int, [UInt32], Int) in
            let port = try! MessagePort()
            let events = Recorder<String>()
            loop.add(port, forMode: .default)
            loop.add(recordingObserver(events, activities: .afterWaiting), forMode: .default)
            for id: UInt32 in 1...3 { try! port.send(msgid: id, timeout: .seconds(5)) }
            _ = loop.run(mode: .default, for: .milliseconds(300), returnAfterSourceHandled: true)
            let queuedAfterRun = port.queuedCount
            let wakeUps = events.count
            let got = Recorder<UInt32>()
            port.setHandler { m in
                got.append(m.msgid)
                if got.count == 3 { loop.stop() }
            }
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            let remaining = port.queuedCount
            port.invalidate()
            return (queuedAfterRun, wakeUps, got.values, remaining)
        })
        #expect(r.0 == 3, "messages were dropped or consumed without a handler")
        #expect(r.1 <= 1, "the loop spun (\(r.1) wake-ups) on messages it could not deliver")
        #expect(r.2 == [1, 2, 3])
        #expect(r.3 == 0)
    }

    @Test("§3.16 setting a handler while the loop sleeps delivers the messages that were waiting")
    func settingHandlerOnSleepingLoopDeliversQueuedMessages() throws {
        let port = try MessagePort()
        let got = Recorder<UInt32>()
        let lt = LoopThread { loop -> RLResult in
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        for id: UInt32 in 1...3 { try port.send(msgid: id, timeout: .seconds(5)) }
        #expect(lt.waitUntilSleeping())
        #expect(port.queuedCount == 3)
        port.setHandler { m in
            got.append(m.msgid)
            if got.count == 3 { lt.loop.stop() }
        }
        #expect(waitUntil { got.count == 3 }, "queued messages were not delivered after setHandler")
        #expect(got.values == [1, 2, 3])
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        port.invalidate()
    }

    @Test("§3.16 setHandler(nil) stops delivery; messages stay queued")
    func clearingHandlerKeepsMessagesQueued() throws {
        let r = try #require(onLoopThread { loop -> ([UInt32], Int) in
            let port = try! MessagePort()
            let got = Recorder<UInt32>()
            port.setHandler { got.append($0.msgid) }
            loop.add(port, forMode: .default)
            try! port.send(msgid: 1, timeout: .seconds(5))
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            port.setHandler(nil)
            try! port.send(msgid: 2, timeout: .seconds(5))
            _ = loop.run(mode: .default, for: .milliseconds(100), returnAfterSourceHandled: true)
            let queued = port.queuedCount
            port.invalidate()
            return (got.values, queued)
        })
        #expect(r.0 == [1])
        #expect(r.1 == 1)
    }

    @Test("§3.16 invalidate() removes the port from its loop and discards queued messages")
    func invalidateDiscardsQueuedMessages() throws {
        let r = try #require(onLoopThread { loop -> (Int, Int, Bool, RLResult, Int) in
            let port = try! MessagePort()
            let delivered = Counter()
            loop.add(port, forMode: "p")
            for id: UInt32 in 1...5 { try! port.send(msgid: id, timeout: .seconds(5)) }
            let before = port.queuedCount
            port.invalidate()
            port.setHandler { _ in delivered.increment() }
            let result = loop.run(mode: "p", for: longRun, returnAfterSourceHandled: false)
            return (before, port.queuedCount, port.isValid, result, delivered.current)
        })
        #expect(r.0 == 5)
        #expect(r.1 == 0, "queued messages were not discarded")
        #expect(r.2 == false)
        #expect(r.3 == .finished, "the invalidated port was still in its mode")
        #expect(r.4 == 0)
    }

    @Test("§3.16 the delegate is held weakly")
    func delegateIsHeldWeakly() throws {
        let port = try MessagePort()
        var delegate: RecordingDelegate? = RecordingDelegate()
        let weakDelegate = WeakRef(delegate)
        port.delegate = delegate
        #expect(port.delegate === delegate)
        delegate = nil
        #expect(weakDelegate.object == nil, "the port kept its delegate alive")
        #expect(port.delegate == nil)
        port.invalidate()
    }

    @Test("§3.16 a message carries data and port components intact, and its reply port")
    func componentsArriveIntact() throws {
        let carried = try MessagePort()
        let reply = try MessagePort()
        let payload = Data((0..<200).map { UInt8($0) })
        let r = try #require(onLoopThread { loop -> (UInt32, [String], Bool) in
            let port = try! MessagePort()
            let received = Ref<MessagePort.Message>()
            port.setHandler { received.value = $0 }
            loop.add(port, forMode: .default)
            try! port.send(msgid: 77, components: [.data(payload), .port(carried), .data(Data())],
                           from: reply, timeout: .seconds(5))
            _ = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            port.invalidate()
            guard let m = received.value else { return (0, [], false) }
            let parts: [String] = m.components.map {
                switch $0 {
                case .data(let d): return d == payload ? "payload" : (d.isEmpty ? "empty" : "other data")
                case .port(let p): return p === carried ? "carried" : "other port"
                }
            }
            return (m.msgid, parts, m.replyPort === reply)
        })
        #expect(r.0 == 77)
        #expect(r.1 == ["payload", "carried", "empty"])
        #expect(r.2, "replyPort is not the from: port")
        carried.invalidate()
        reply.invalidate()
    }

    @Test("§2 PortError has the four required cases")
    func portErrorCases() {
        let all: [PortError] = [.invalidPort, .timedOut, .messageTooLarge(limit: 1), .resourceExhausted(errno: EMFILE)]
        for (i, a) in all.enumerated() {
            for (j, b) in all.enumerated() { #expect((a == b) == (i == j)) }
        }
        #expect(PortError.messageTooLarge(limit: 1) != .messageTooLarge(limit: 2))
    }

    @Test("§3.16 Message can be built directly")
    func messageInitialiser() throws {
        let p = try MessagePort()
        var m = MessagePort.Message(msgid: 5)
        #expect(m.msgid == 5 && m.components.isEmpty && m.replyPort == nil)
        m.replyPort = p
        m.components = [.data(Data([1, 2]))]
        m.msgid = 6
        #expect(m.replyPort === p && m.components.count == 1 && m.msgid == 6)
        p.invalidate()
    }

    @Test("§3.16 replyPort round trip between two loops")
    func replyPortRoundTrip() throws {
        let serverPort = try MessagePort()
        let clientPort = try MessagePort()
        let serverSaw = Ref<(UInt32, Bool, Bool)>()
        let server = LoopThread { loop -> RLResult in
            let me = pthread_self()
            serverPort.setHandler { m in
                serverSaw.value = (m.msgid, m.replyPort === clientPort, isCurrentThread(me))
                try? m.replyPort?.send(msgid: m.msgid + 1, components: m.components, timeout: .seconds(5))
            }
            loop.add(serverPort, forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        let client = try #require(onLoopThread { loop -> (UInt32, Bool, RLResult) in
            let me = pthread_self()
            let reply = Ref<(UInt32, Bool)>()
            clientPort.setHandler { m in
                reply.value = (m.msgid, isCurrentThread(me))
                loop.stop()
            }
            loop.add(clientPort, forMode: .default)
            try! serverPort.send(msgid: 10, components: [.data(Data("ping".utf8))], from: clientPort,
                                 timeout: .seconds(5))
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
            return (reply.value?.0 ?? 0, reply.value?.1 ?? false, result)
        })
        server.loop.stop()
        #expect(server.join() == .stopped)
        #expect(serverSaw.value?.0 == 10)
        #expect(serverSaw.value?.1 == true)
        #expect(serverSaw.value?.2 == true)
        #expect(client.0 == 11)
        #expect(client.1, "the reply was not delivered on the sender's loop thread")
        #expect(client.2 == .stopped)
        serverPort.invalidate()
        clientPort.invalidate()
    }

    @Test("§3.10 a loop asleep in mode B with no deadline is not woken by a port of mode A, and is by a port of B")
    func sleepIgnoresPortsOfOtherModes() throws {
        let inA = try MessagePort(), inB = try MessagePort()
        let wakeUps = Recorder<String>()
        let got = Recorder<UInt32>()
        inA.setHandler { got.append($0.msgid) }
        let lt = LoopThread { loop -> RLResult in
            inB.setHandler { message in
                got.append(message.msgid)
                loop.stop()
            }
            loop.add(inA, forMode: "A")
            loop.add(inB, forMode: "B")
            loop.add(recordingObserver(wakeUps, activities: .afterWaiting), forMode: "B")
            // No deadline: only a port can end this sleep.
            return loop.run(mode: "B", for: .seconds(4_000_000_000), returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(in: "B"))
        for msgid: UInt32 in 1...3 { try inA.send(msgid: msgid, timeout: .seconds(5)) }
        // Long enough for a wrongly woken loop to show an afterWaiting.
        usleep(200_000)
        #expect(wakeUps.count == 0, "a port of mode A woke a loop asleep in mode B")
        #expect(lt.loop.isWaiting)
        try inB.send(msgid: 10, timeout: .seconds(5))
        #expect(lt.join() == .stopped)
        #expect(got.values == [10])
        #expect(wakeUps.count == 1)
        #expect(inA.queuedCount == 3)
        inA.invalidate()
        inB.invalidate()
    }

    @Test("§3.16 a port delivers only while its loop runs a mode that holds it, then in order")
    func portDeliversOnlyInItsModes() throws {
        let r = try #require(onLoopThread { loop -> ([UInt32], RLResult, [UInt32]) in
            let port = try! MessagePort()
            let got = Recorder<UInt32>()
            port.setHandler { got.append($0.msgid) }
            loop.add(port, forMode: "P")
            for id: UInt32 in 1...3 { try! port.send(msgid: id, timeout: .seconds(5)) }
            let other = loop.run(mode: "Q", for: longRun, returnAfterSourceHandled: false)
            let seenInQ = got.values
            loop.perform(inModes: ["P"]) {}
            for _ in 0..<4 { _ = loop.run(mode: "P", for: .milliseconds(200), returnAfterSourceHandled: true) }
            port.invalidate()
            return (seenInQ, other, got.values)
        })
        #expect(r.0 == [])
        #expect(r.1 == .finished)
        #expect(r.2 == [1, 2, 3])
    }
}

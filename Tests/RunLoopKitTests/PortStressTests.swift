// Stress: many senders into one bounded port (Guarantees §3.16 under load).
// 4 sender threads × N messages into one port with queueLimit 64: every message is
// delivered exactly once and each sender's order is kept. N = 250,000 normally,
// 5,000 when RUNLOOPKIT_SANITIZER is set (the sanitizer runs).

import FoundationEssentials
import Glibc
import RunLoopKit
import Synchronization
import Testing

private let underSanitizer = environment("RUNLOOPKIT_SANITIZER") != nil

/// Per-sender sequence checking, touched only on the receiving loop's thread
/// (locked anyway, so the checker itself is race-free by construction).
private final class SequenceChecker: Sendable {
    struct State {
        var next: [UInt32]
        var total = 0
        var outOfOrder = 0
        var badPayload = 0
        var firstProblem: String?
    }
    let state: PLocked<State>
    init(senders: Int) { state = PLocked(State(next: Array(repeating: 0, count: senders))) }

    /// Returns the running total.
    func record(sender: Int, seq: UInt32, payloadOK: Bool) -> Int {
        state.withLock { s in
            if seq != s.next[sender] {
                s.outOfOrder += 1
                if s.firstProblem == nil { s.firstProblem = "sender \(sender): got \(seq), expected \(s.next[sender])" }
            }
            if !payloadOK {
                s.badPayload += 1
                if s.firstProblem == nil { s.firstProblem = "sender \(sender) seq \(seq): bad payload" }
            }
            s.next[sender] = seq &+ 1
            s.total += 1
            return s.total
        }
    }
    var snapshot: State { state.withLock { $0 } }
}

@Suite("Port stress", .serialized)
struct PortStressTests {

    private func run(senders: Int, perSender: Int, withPayload: Bool) throws {
        let port = try MessagePort(queueLimit: 64)
        let checker = SequenceChecker(senders: senders)
        let expected = senders * perSender
        let receiverThread = Ref<pthread_t>()
        let wrongThread = Counter()
        let lt = LoopThread { loop -> RLResult in
            let me = pthread_self()
            receiverThread.value = me
            port.setHandler { m in
                if !isCurrentThread(me) { wrongThread.increment() }
                let sender = Int(m.msgid >> 24), seq = m.msgid & 0xFF_FFFF
                var payloadOK = true
                if withPayload {
                    payloadOK = false
                    if m.components.count == 1, case .data(let d) = m.components[0], d.count == 8 {
                        let v = d.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                        payloadOK = v == UInt64(m.msgid) &* 0x9E37_79B9_7F4A_7C15
                    }
                }
                if checker.record(sender: sender, seq: seq, payloadOK: payloadOK) == expected { loop.stop() }
            }
            loop.add(port, forMode: .default)
            return loop.run(mode: .default, for: .seconds(1800), returnAfterSourceHandled: false)
        }
        let failures = Recorder<String>()
        let finishedSenders = Counter()
        for s in 0..<senders {
            startThread {
                for i in 0..<perSender {
                    let id = UInt32(s) << 24 | UInt32(i)
                    var components: [MessagePort.Message.Component] = []
                    if withPayload {
                        var v = UInt64(id) &* 0x9E37_79B9_7F4A_7C15
                        components = [.data(Data(bytes: &v, count: 8))]
                    }
                    do throws(PortError) {
                        try port.send(msgid: id, components: components, timeout: .seconds(120))
                    } catch {
                        failures.append("sender \(s) message \(i): \(error)")
                        break
                    }
                }
                finishedSenders.increment()
            }
        }
        let allSent = waitUntil(timeout: .seconds(1800)) { finishedSenders.current == senders }
        #expect(allSent, "senders did not finish")
        let result = lt.join(timeout: .seconds(600))
        let state = checker.snapshot
        #expect(failures.values.isEmpty, "\(failures.values.prefix(3))")
        #expect(result == .stopped, "receiver: \(String(describing: result)), delivered \(state.total) of \(expected)")
        #expect(state.total == expected)
        #expect(state.outOfOrder == 0, "\(state.outOfOrder) out of order; first: \(state.firstProblem ?? "-")")
        #expect(state.badPayload == 0, "\(state.badPayload) bad payloads; first: \(state.firstProblem ?? "-")")
        #expect(state.next == Array(repeating: UInt32(perSender), count: senders))
        #expect(wrongThread.current == 0, "messages delivered off the receiving loop's thread")
        #expect(port.queuedCount == 0)
        if result == nil { lt.loop.stop() }
        port.invalidate()
    }

    @Test("stress: 4 senders × N messages into one port (queueLimit 64) — each delivered exactly once, per-sender order kept")
    func fourSendersIntoOneBoundedPort() throws {
        try run(senders: 4, perSender: underSanitizer ? 5_000 : 250_000, withPayload: false)
    }

    @Test("stress: 4 senders with 8-byte Data payloads — payloads intact, order kept")
    func fourSendersWithPayloads() throws {
        try run(senders: 4, perSender: underSanitizer ? 2_000 : 25_000, withPayload: true)
    }

    @Test("stress: invalidating a port while 4 senders are blocked on it releases them all with .invalidPort")
    func invalidateReleasesManyBlockedSenders() throws {
        let rounds = underSanitizer ? 5 : 25
        for round in 0..<rounds {
            let port = try MessagePort(queueLimit: 2)
            try port.send(msgid: 0, timeout: .seconds(5))
            try port.send(msgid: 0, timeout: .seconds(5))
            let outcomes = Recorder<PortError?>()
            for _ in 0..<4 {
                startThread {
                    do throws(PortError) {
                        try port.send(msgid: 1, timeout: .seconds(120))
                        outcomes.append(nil)
                    } catch { outcomes.append(error) }
                }
            }
            if round % 2 == 0 { usleep(UInt32(1_000 * (round % 7))) }  // vary the interleaving
            port.invalidate()
            guard waitUntil({ outcomes.count == 4 }) else {
                Issue.record("round \(round): a blocked sender hung after invalidate()")
                break
            }
            #expect(outcomes.values.allSatisfy { $0 == .invalidPort }, "round \(round): \(outcomes.values)")
        }
    }
}

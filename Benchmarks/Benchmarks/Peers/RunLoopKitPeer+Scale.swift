import CBenchmarkPeers
import Foundation
import RunLoopKit
import Synchronization

/// The scale rows (`payloads`, `xpayloads`, `threads`): RunLoopKit's ping-pong measured at
/// several payload sizes and thread counts, each point summarised as a `ScalePoint`.
extension RunLoopKitPeer {
    /// In-process payloads: 8 B to 1 MiB.
    static let payloadSizes = [8, 4_096, 65_536, 1 << 20]
    /// Cross-process payloads: 8 B to the largest DATA component one frame holds
    /// (Protocols/port-message-frame.md §3.4: 65,536 − 16 − 8 bytes).
    static let crossProcessPayloadSizes = [8, 4_096, 32_768, 65_512]
    /// Pairs of resident threads ping-ponging at once.
    static let threadPairs = [1, 16, 256]

    static func scale(_ workload: Workload, _ plan: LatencyPlan) -> ScaleMeasurement {
        var points: [ScalePoint] = []
        var messages = 0
        var allocations = bench_alloc_counts()
        func add(_ parameter: Int, _ measurement: LatencyMeasurement, roundTripsPerSecond: Double? = nil) {
            let summary = LatencySummary(
                sortingNanoseconds: UnsafeMutableBufferPointer(rebasing: measurement.samples.storage[..<measurement.count]))
            points.append(ScalePoint(parameter: parameter, p50: summary.p50, p99: summary.p99,
                                     roundTripsPerSecond: roundTripsPerSecond ?? 1e6 / summary.mean,
                                     allocationsPerMessage: measurement.allocations.allocationsPerMessage(measurement.messages),
                                     bytesPerMessage: measurement.allocations.bytesPerMessage(measurement.messages)))
            messages += measurement.messages
            allocations.allocations += measurement.allocations.end.allocations &- measurement.allocations.begin.allocations
            allocations.bytes += measurement.allocations.end.bytes &- measurement.allocations.begin.bytes
        }
        switch workload {
        case .payloads:
            for bytes in payloadSizes { add(bytes, payloadPingPong(plan, bytes: bytes)) }
        case .xpayloads:
            for bytes in crossProcessPayloadSizes { add(bytes, crossProcessPingPong(plan, payloadBytes: bytes)) }
        case .threads:
            for pairs in threadPairs {
                let (measurement, rate) = ThreadPairs.measure(plan, pairs: pairs)
                add(pairs, measurement, roundTripsPerSecond: rate)
            }
        default:
            fail("\(workload.rawValue) is not a scale row")
        }
        return ScaleMeasurement(points: points, messages: messages,
                                allocations: AllocationWindow(begin: bench_alloc_counts(), end: allocations))
    }

    /// `pingpong` with one shared block of `bytes` bytes as its only component; the sequence
    /// number travels as the msgid, so the block itself is never rebuilt or copied.
    static func payloadPingPong(_ plan: LatencyPlan, bytes: Int) -> LatencyMeasurement {
        let initiator = ResidentThread(name: "payload-initiator")
        let responder = ResidentThread(name: "payload-responder")
        let initiatorPort = makePort()
        let responderPort = makePort()
        let block = Payloads.block(bytes)
        let trips = RoundTrips(peer: .runLoopKit, plan: plan)
        responderPort.setHandler { message in
            trips.responderReceived(blockSequence(of: message, bytes: bytes))
            guard let replyPort = message.replyPort else { fail("RunLoopKit: a ping arrived without its reply port") }
            sendBlock(to: replyPort, msgid: message.msgid, message.components, from: nil)
        }
        initiatorPort.setHandler { message in
            if let next = trips.initiatorReceived(blockSequence(of: message, bytes: bytes)) {
                sendBlock(to: responderPort, msgid: UInt32(truncatingIfNeeded: next), [.data(block)], from: initiatorPort)
            }
        }
        responder.runLoop.add(responderPort, forMode: .default)
        initiator.runLoop.add(initiatorPort, forMode: .default)
        do {
            try initiator.perform {
                sendBlock(to: responderPort, msgid: UInt32(truncatingIfNeeded: trips.firstPing()), [.data(block)],
                          from: initiatorPort)
            }
        } catch {
            fail("RunLoopKit: perform failed: \(error)")
        }
        let measurement = trips.waitForCompletion()
        initiatorPort.invalidate()
        responderPort.invalidate()
        initiator.stop()
        responder.stop()
        return measurement
    }

    /// The sequence number of a scale row's message (its msgid), once its one component was
    /// checked as the block of `bytes` bytes; nil when anything is wrong.
    static func blockSequence(of message: MessagePort.Message, bytes: Int) -> UInt64? {
        guard message.components.count == 1, case .data(let payload) = message.components[0],
              Payloads.checkBlock(payload, bytes: bytes) else { return nil }
        return UInt64(message.msgid)
    }

    static func sendBlock(to port: MessagePort, msgid: UInt32, _ components: [MessagePort.Message.Component],
                          from replyPort: MessagePort?) {
        do {
            try port.send(msgid: msgid, components: components, from: replyPort, timeout: sendTimeout)
        } catch {
            fail("RunLoopKit: send failed: \(error)")
        }
    }
}

/// The `threads` scale row: `pairs` pairs of resident threads, every pair ping-ponging an
/// 8-byte payload at once until the plan's budget has passed. Each initiator records its
/// round trips (after a short warm-up, while its share of the sample buffer lasts) and counts
/// all of them; the point's p50 is over every pair's samples, its rate all pairs' round trips
/// over the wall time from the first ping to the last pair's end.
///
/// `@unchecked Sendable`: as `RoundTrips` — each pair's initiator state is touched only on its
/// initiator's thread, its responder state only on its responder's; the main thread reads both
/// after `finished`.
final class ThreadPairs: @unchecked Sendable {
    private static let warmup = 20

    private let pairs: Int
    private let capacityEach: Int
    private let budgetNanoseconds: UInt64
    private let samples: SampleBuffer
    private let finished = KernelEvent()
    private let running: Atomic<Int>
    private var startedAt: UInt64 = 0
    private let endedAt = Atomic<UInt64>(0)
    // Pair i's slots: initiator side.
    private let sentAt: UnsafeMutablePointer<UInt64>
    private let inFlight: UnsafeMutablePointer<UInt64>
    private let recorded: UnsafeMutablePointer<Int>
    // Responder side.
    private let answered: UnsafeMutablePointer<UInt64>

    private init(_ plan: LatencyPlan, pairs: Int) {
        self.pairs = pairs
        capacityEach = max(plan.capacity / pairs, 100)
        budgetNanoseconds = plan.budgetNanoseconds
        samples = SampleBuffer(capacity: capacityEach * pairs)
        running = Atomic(pairs)
        sentAt = .allocate(capacity: pairs)
        sentAt.initialize(repeating: 0, count: pairs)
        inFlight = .allocate(capacity: pairs)
        inFlight.initialize(repeating: 0, count: pairs)
        recorded = .allocate(capacity: pairs)
        recorded.initialize(repeating: 0, count: pairs)
        answered = .allocate(capacity: pairs)
        answered.initialize(repeating: 0, count: pairs)
    }

    deinit {
        sentAt.deallocate()
        inFlight.deallocate()
        recorded.deallocate()
        answered.deallocate()
    }

    /// The point's samples (in a measurement whose allocation window spans the whole run) and
    /// the aggregate round trips per second.
    static func measure(_ plan: LatencyPlan, pairs: Int) -> (LatencyMeasurement, Double) {
        let run = ThreadPairs(plan, pairs: pairs)
        var threads: [ResidentThread] = []
        var ports: [MessagePort] = []
        for pair in 0..<pairs {
            let initiator = ResidentThread(name: "pair\(pair)-initiator")
            let responder = ResidentThread(name: "pair\(pair)-responder")
            let initiatorPort = RunLoopKitPeer.makePort()
            let responderPort = RunLoopKitPeer.makePort()
            responderPort.setHandler { message in
                let payload = RunLoopKitPeer.data(of: message)
                run.responderReceived(pair, Payloads.sequence(of: payload))
                RunLoopKitPeer.send(to: initiatorPort, payload, from: nil)
            }
            initiatorPort.setHandler { message in
                if let next = run.initiatorReceived(pair, Payloads.sequence(of: RunLoopKitPeer.data(of: message))) {
                    RunLoopKitPeer.send(to: responderPort, Payloads.sequence(next), from: nil)
                }
            }
            responder.runLoop.add(responderPort, forMode: .default)
            initiator.runLoop.add(initiatorPort, forMode: .default)
            threads += [initiator, responder]
            ports += [initiatorPort, responderPort]
        }
        let allocationsBegin = bench_alloc_snapshot()
        run.startedAt = bench_now_ns()
        for pair in 0..<pairs {
            let responderPort = ports[2 * pair + 1]
            do {
                try threads[2 * pair].perform {
                    RunLoopKitPeer.send(to: responderPort, Payloads.sequence(run.firstPing(pair)), from: nil)
                }
            } catch {
                fail("RunLoopKit: perform failed: \(error)")
            }
        }
        run.finished.wait()
        let allocationsEnd = bench_alloc_snapshot()
        var roundTrips: UInt64 = 0
        for pair in 0..<pairs {
            if run.answered[pair] != run.inFlight[pair] {
                fail("RunLoopKit: pair \(pair)'s responder answered \(run.answered[pair]) pings, its initiator sent \(run.inFlight[pair])")
            }
            roundTrips += run.inFlight[pair]
        }
        for port in ports { port.invalidate() }
        for thread in threads { thread.stop() }
        // Gather each pair's recorded samples at the front of the buffer.
        var count = 0
        for pair in 0..<pairs {
            for index in 0..<run.recorded[pair] {
                run.samples.storage[count] = run.samples.storage[pair * run.capacityEach + index]
                count += 1
            }
        }
        if count == 0 { fail("RunLoopKit: \(pairs) thread pairs recorded no round trip") }
        let elapsed = Double(run.endedAt.load(ordering: .relaxed) &- run.startedAt)
        let measurement = LatencyMeasurement(samples: run.samples, count: count, sameCPU: 0,
                                             messages: Int(roundTrips) * 2,
                                             allocations: AllocationWindow(begin: allocationsBegin, end: allocationsEnd))
        return (measurement, Double(roundTrips) * 1e9 / max(elapsed, 1))
    }

    /// Initiator of `pair`: the first ping.
    private func firstPing(_ pair: Int) -> UInt64 {
        inFlight[pair] = 1
        sentAt[pair] = bench_now_ns()
        return 1
    }

    private func responderReceived(_ pair: Int, _ seq: UInt64?) {
        guard let seq, seq == answered[pair] + 1 else {
            fail("RunLoopKit: pair \(pair)'s responder received ping \(seq.map(String.init) ?? "(malformed)"), expected \(answered[pair] + 1)")
        }
        answered[pair] = seq
    }

    /// Initiator of `pair`: checks a pong, records it; the next ping, or nil once the budget
    /// has passed (the last pair to stop ends the run).
    private func initiatorReceived(_ pair: Int, _ seq: UInt64?) -> UInt64? {
        let now = bench_now_ns()
        guard let seq, seq == inFlight[pair] else {
            fail("RunLoopKit: pair \(pair)'s initiator received pong \(seq.map(String.init) ?? "(malformed)"), expected \(inFlight[pair])")
        }
        if seq > Self.warmup && recorded[pair] < capacityEach {
            samples.storage[pair * capacityEach + recorded[pair]] = now &- sentAt[pair]
            recorded[pair] += 1
        }
        if now &- startedAt >= budgetNanoseconds {
            if running.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 {
                endedAt.store(bench_now_ns(), ordering: .relaxed)
                finished.signal()
            }
            return nil
        }
        inFlight[pair] += 1
        sentAt[pair] = bench_now_ns()
        return inFlight[pair]
    }
}

import CBenchmarkPeers
import RunLoopKit
import Synchronization

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

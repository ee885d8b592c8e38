import CBenchmarkPeers
import Synchronization

/// The bookkeeping of an event-driven ping-pong between two framework threads (the
/// Swift peers): the initiator sends ping `n`, the responder checks it and sends it
/// back, the initiator checks the pong, records the round trip and sends `n + 1`.
///
/// `@unchecked Sendable`: the initiator's state is touched only on the initiator's
/// thread and the responder's only on the responder's; the main thread reads both only
/// after `waitForCompletion` returns. Each framework's message handoff orders those
/// accesses, which the compiler cannot see.
final class RoundTrips: @unchecked Sendable {
    private let peer: Peer
    private var recorder: LatencyRecorder
    private let finished = KernelEvent()
    // Initiator's thread.
    private var inFlight: UInt64 = 0
    private var sentAt: UInt64 = 0
    // Responder's thread.
    private var answered: UInt64 = 0
    private let responderCPU = Atomic<Int32>(-1)

    init(peer: Peer, plan: LatencyPlan) {
        self.peer = peer
        recorder = LatencyRecorder(plan: plan, messagesPerSample: 2)
    }

    /// Initiator: the first ping to send. Call right before sending it.
    func firstPing() -> UInt64 {
        inFlight = 1
        sentAt = bench_now_ns()
        return inFlight
    }

    /// Responder: checks a ping; the caller then sends the same payload back.
    func responderReceived(_ seq: UInt64?) {
        guard let seq, seq == answered + 1 else {
            fail("\(peer.rawValue): responder received ping \(seq.map(String.init) ?? "(malformed)"), expected \(answered + 1)")
        }
        responderCPU.store(bench_current_cpu(), ordering: .relaxed)
        answered = seq
    }

    /// Initiator: checks a pong and records the round trip. Returns the next ping to
    /// send (call right before sending it), or nil when the run is complete.
    func initiatorReceived(_ seq: UInt64?) -> UInt64? {
        let now = bench_now_ns()
        guard let seq, seq == inFlight else {
            fail("\(peer.rawValue): initiator received pong \(seq.map(String.init) ?? "(malformed)"), expected \(inFlight)")
        }
        let same = bench_current_cpu() == responderCPU.load(ordering: .relaxed)
        guard recorder.add(now &- sentAt, sameCPU: same, now: now) else {
            finished.signal()
            return nil
        }
        inFlight += 1
        sentAt = bench_now_ns()
        return inFlight
    }

    /// Main thread: sleeps until the initiator has its samples, then checks that the
    /// responder answered exactly the pings sent.
    func waitForCompletion() -> LatencyMeasurement {
        finished.wait()
        if answered != inFlight {
            fail("\(peer.rawValue): responder answered \(answered) pings, initiator sent \(inFlight)")
        }
        return recorder.measurement
    }
}

import CBenchmarkPeers
import Synchronization

/// The bookkeeping of an event-driven ping-pong between two framework threads (the
/// Swift peers): the initiator sends ping `n`, the responder checks it and sends it
/// back, the initiator checks the pong, records the round trip and sends `n + 1`.
///
/// The responder is a thread of this process (`responderReceived`), or another process
/// (the `xprocess` workload) that checks the pings itself and reports where it ran and
/// how many it answered through a `bench_responder_cell` both processes map.
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
    /// The responder's side when it is another process; nil when it is a thread here.
    private let remoteResponder: UnsafeMutablePointer<bench_responder_cell>?

    init(peer: Peer, plan: LatencyPlan, remoteResponder: UnsafeMutablePointer<bench_responder_cell>? = nil) {
        self.peer = peer
        self.remoteResponder = remoteResponder
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
        let responder = if let remoteResponder { bench_responder_cell_cpu(remoteResponder) }
                        else { responderCPU.load(ordering: .relaxed) }
        let same = bench_current_cpu() == responder
        guard recorder.add(now &- sentAt, sameCPU: same, now: now) else {
            finished.signal()
            return nil
        }
        inFlight += 1
        sentAt = bench_now_ns()
        return inFlight
    }

    /// Main thread: sleeps until the initiator has its samples, then checks that a
    /// responder thread answered exactly the pings sent. A responder process is checked
    /// by the caller, with `checkAnswered`, once it has exited.
    func waitForCompletion() -> LatencyMeasurement {
        finished.wait()
        if remoteResponder == nil { checkAnswered(answered) }
        return recorder.measurement
    }

    /// Main thread, after `waitForCompletion`: fails unless `count` pings were answered.
    func checkAnswered(_ count: UInt64) {
        if count != inFlight {
            fail("\(peer.rawValue): responder answered \(count) pings, initiator sent \(inFlight)")
        }
    }
}

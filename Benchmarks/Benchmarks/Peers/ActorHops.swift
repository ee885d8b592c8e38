import CBenchmarkPeers
import Foundation

/// The `actorhop` workload: a task on the cooperative pool awaits `answer` on an actor, which
/// checks the 8-byte sequence payload and returns it with the CPU it ran on; the task checks
/// the reply, records the round trip and calls again with the next number. The peers differ
/// only in the actor's executor. One sample is two one-way messages (the call and the
/// return), as in `pingpong`; at the end the task asks the actor how many calls it answered.
///
/// Pinning: `Pinning` pins the child process before any thread exists, so in the pinned
/// regime the cooperative pool's threads, the resident thread and NIO's event loop all share
/// CPU 0, as the two threads of every other pinned row do.
enum ActorHops {
    /// Main thread: runs the calling task against `target` until `plan` is complete.
    static func measure<Target: HopTarget>(_ plan: LatencyPlan, peer: Peer, target: Target) -> LatencyMeasurement {
        BlockingTask.run {
            var recorder = LatencyRecorder(plan: plan, messagesPerSample: 2)
            var seq: UInt64 = 0
            repeat {
                seq += 1
                let calledAt = bench_now_ns()
                let reply = await target.answer(Payloads.sequence(seq))
                let now = bench_now_ns()
                guard Payloads.sequence(of: reply.payload) == seq else {
                    fail("\(peer.rawValue): call \(seq) returned \(Payloads.sequence(of: reply.payload).map(String.init) ?? "(malformed)")")
                }
                let same = bench_current_cpu() == reply.cpu
                if !recorder.add(now &- calledAt, sameCPU: same, now: now) { break }
            } while true
            let answered = await target.answered
            if answered != seq { fail("\(peer.rawValue): actor answered \(answered) calls, task made \(seq)") }
            return recorder.measurement
        }
    }
}

/// An actor of the `actorhop` workload; each peer's differs only in its executor.
protocol HopTarget: Actor {
    /// Checks that `payload` is the next sequence number; returns it and the CPU it ran on.
    func answer(_ payload: Data) -> HopReply
    /// How many calls `answer` accepted.
    var answered: UInt64 { get }
}

/// What an `actorhop` actor returns.
struct HopReply: Sendable {
    var payload: Data
    var cpu: Int32
}

/// An `actorhop` actor's state and its one method, kept in one place so that every peer's
/// actor does exactly the same work.
struct HopCounter {
    let peer: Peer
    private(set) var answered: UInt64 = 0

    init(peer: Peer) { self.peer = peer }

    mutating func answer(_ payload: Data) -> HopReply {
        guard let seq = Payloads.sequence(of: payload), seq == answered + 1 else {
            fail("\(peer.rawValue): actor received call \(Payloads.sequence(of: payload).map(String.init) ?? "(malformed)"), expected \(answered + 1)")
        }
        answered = seq
        return HopReply(payload: payload, cpu: bench_current_cpu())
    }
}

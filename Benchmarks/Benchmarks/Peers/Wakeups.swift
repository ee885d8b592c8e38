import CBenchmarkPeers
import Synchronization

/// The `perform` workload for the Swift peers: how long from handing a block to a
/// sleeping thread until the block starts there.
///
/// The main thread stamps the clock and posts a block; the block stamps the clock as
/// its first act, checks its sequence number and acknowledges through a `KernelEvent`,
/// on which the main thread sleeps. The main thread then waits until the target thread is
/// asleep in the kernel again (`bench_wait_until_asleep`, yielding the CPU) before the next
/// sample: without that, an acknowledgement that woke the main thread at once (pinned, both
/// share a CPU) let it post while the target was still finishing its pass, and those samples
/// measured no wake-up at all (a third of RunLoopKit's, by its loop statistics, and a share
/// that depends on how long each framework takes to go back to sleep, so the peers were not
/// measured alike).
///
/// `@unchecked Sendable`: `expected` is touched only by blocks on the target thread,
/// which run one at a time, each after the previous one acknowledged.
final class Wakeups: @unchecked Sendable {
    private let peer: Peer
    private let acknowledged = KernelEvent()
    private let wokeAt = Atomic<UInt64>(0)
    private let targetCPU = Atomic<Int32>(-1)
    private let targetThread = Atomic<Int32>(0)
    private var expected: UInt64 = 1

    init(peer: Peer) { self.peer = peer }

    /// Target thread: the body of every posted block.
    func blockRan(_ seq: UInt64) {
        wokeAt.store(bench_now_ns(), ordering: .relaxed)
        guard seq == expected else { fail("\(peer.rawValue): block \(seq) ran, expected \(expected)") }
        targetCPU.store(bench_current_cpu(), ordering: .relaxed)
        targetThread.store(bench_current_tid(), ordering: .relaxed)
        expected += 1
        acknowledged.signal()
    }

    /// Main thread: posts `seq` through `post` until the plan is complete. `post` must
    /// arrange for `blockRan(seq)` to run on the target thread.
    func measure(_ plan: LatencyPlan, post: (UInt64) -> Void) -> LatencyMeasurement {
        var recorder = LatencyRecorder(plan: plan, messagesPerSample: 1)
        var seq: UInt64 = 0
        repeat {
            seq += 1
            let cpu = bench_current_cpu()
            let postedAt = bench_now_ns()
            post(seq)
            acknowledged.wait()
            let sample = wokeAt.load(ordering: .relaxed) &- postedAt
            let same = cpu == targetCPU.load(ordering: .relaxed)
            if !recorder.add(sample, sameCPU: same, now: bench_now_ns()) { break }
            bench_wait_until_asleep(targetThread.load(ordering: .relaxed))
        } while true
        if expected != seq + 1 { fail("\(peer.rawValue): \(expected - 1) blocks ran, \(seq) posted") }
        return recorder.measurement
    }
}

import CBenchmarkPeers
import Foundation
import Synchronization

/// The `fanin` workload for the Swift peers: `BENCH_FANIN_SENDERS` (4) sender threads each
/// send their share of the stream's 64-byte `Data` payloads into one peer's queue; one
/// receiver checks every sender's messages in that sender's order and stamps the end when
/// every sender's last message arrived. The same steps as `bench_ring_fanin` in C.
///
/// Word 0 of each payload is `sender << 48 | n`. Each sender sends `warmup / 4` messages,
/// the receiver signals once all of them arrived, the main thread then opens the measured
/// window (clock, allocation counter, RSS) and lets the senders go on, each until its
/// `maxMessages / 4` or the budget.
///
/// `@unchecked Sendable`: the receiving state is touched only by the receiver, one message at
/// a time; each sender's count only by that sender before its last message (which the queue
/// orders before the receiver's end); the main thread reads both after `finished`.
final class FanIn: @unchecked Sendable {
    static let senders = Int(BENCH_FANIN_SENDERS)

    private let peer: Peer
    private let warmupEach: UInt64
    private let maxEach: UInt64
    private let budgetNanoseconds: UInt64
    private let warm = KernelEvent()
    private let finished = KernelEvent()
    private let gates = (0..<FanIn.senders).map { _ in KernelEvent() }
    /// Each sender's "my last send returned", so that no `send` is still inside the peer when
    /// the caller tears it down.
    private let exited = (0..<FanIn.senders).map { _ in KernelEvent() }
    private let startedAt = Atomic<UInt64>(0)
    // Receiver. Raw memory rather than arrays: senders write their own slot of `sent`
    // concurrently, which an array's copy-on-write would not allow.
    private let expected = UnsafeMutablePointer<UInt64>.allocate(capacity: FanIn.senders)
    private var received: UInt64 = 0
    private var finishedSenders = 0
    private var endedAt: UInt64 = 0
    private var allocationsEnd = bench_alloc_counts()
    private var rssEnd: UInt64 = 0
    // Sender `i` writes `sent[i]` only.
    private let sent = UnsafeMutablePointer<UInt64>.allocate(capacity: FanIn.senders)

    init(peer: Peer, plan: StreamPlan) {
        self.peer = peer
        warmupEach = UInt64(plan.warmup / Self.senders)
        maxEach = max(UInt64(plan.maxMessages / Self.senders), warmupEach + 1)
        budgetNanoseconds = plan.budgetNanoseconds
        expected.initialize(repeating: 0, count: Self.senders)
        sent.initialize(repeating: 0, count: Self.senders)
    }

    deinit {
        expected.deallocate()
        sent.deallocate()
    }

    /// Receiver: checks one payload; returns the index of the sender it came from (for a
    /// per-sender credit window).
    @discardableResult
    func receive(_ payload: Data) -> Int {
        guard let (sender, last) = Payloads.checkFanIn(payload, expected: expected, senders: Self.senders) else {
            fail("\(peer.rawValue): a fan-in message arrived wrong or out of its sender's order")
        }
        expected[sender] += 1
        received += 1
        if received == warmupEach * UInt64(Self.senders) { warm.signal() }
        if last {
            finishedSenders += 1
            if finishedSenders == Self.senders {
                endedAt = bench_now_ns()
                allocationsEnd = bench_alloc_snapshot()
                rssEnd = bench_rss_bytes()
                finished.signal()
            }
        }
        return sender
    }

    /// Main thread: runs the senders, each calling `send(sender, payload)` (which may block on
    /// a full queue), waits for the receiver to see every sender's last message and for every
    /// sender's last `send` to return, and checks each sender's count.
    func measure(send: @escaping @Sendable (Int, Data) -> Void) -> StreamMeasurement {
        let threads = (0..<Self.senders).map { sender in
            Thread { self.runSender(sender, send: send) }
        }
        for thread in threads { thread.start() }
        if warmupEach > 0 { warm.wait() }
        let allocationsBegin = bench_alloc_snapshot()
        let rssBegin = bench_rss_bytes()
        startedAt.store(bench_now_ns(), ordering: .sequentiallyConsistent)
        for gate in gates { gate.signal() }
        finished.wait()
        for event in exited { event.wait() }
        for sender in 0..<Self.senders where sent[sender] != expected[sender] {
            fail("\(peer.rawValue): receiver saw \(expected[sender]) messages of sender \(sender), \(sent[sender]) sent")
        }
        let total = (0..<Self.senders).reduce(0) { $0 + sent[$1] } - warmupEach * UInt64(Self.senders)
        return StreamMeasurement(messages: Int(total), elapsedNanoseconds: endedAt &- startedAt.load(ordering: .relaxed),
                                 allocations: AllocationWindow(begin: allocationsBegin, end: allocationsEnd),
                                 rssBegin: rssBegin, rssEnd: rssEnd)
    }

    private func runSender(_ sender: Int, send: (Int, Data) -> Void) {
        let tag = UInt64(sender) << 48
        var n: UInt64 = 0
        while n < warmupEach {
            send(sender, Payloads.stream(tag | n, last: false))
            n += 1
        }
        gates[sender].wait()
        let started = startedAt.load(ordering: .sequentiallyConsistent)
        while true {
            let last = n + 1 == maxEach || (n & 1023 == 0 && bench_now_ns() &- started >= budgetNanoseconds)
            if last { sent[sender] = n + 1 }
            send(sender, Payloads.stream(tag | n, last: last))
            if last {
                exited[sender].signal()
                return
            }
            n += 1
        }
    }
}

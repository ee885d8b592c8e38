import CBenchmarkPeers
import Foundation

/// The throughput workload for the Swift peers: the main thread sends a stream of
/// 64-byte `Data` payloads through the peer's queue to one receiving thread, which
/// checks every payload in order and stamps the end when the last one arrives.
///
/// `@unchecked Sendable`: the receiving state is touched only by the receiving thread,
/// one message at a time; the main thread reads it after `finished` is signalled.
final class StreamReceiver: @unchecked Sendable {
    private let peer: Peer
    private let finished = KernelEvent()
    private var expected: UInt64 = 0
    private var endedAt: UInt64 = 0
    private var allocationsEnd = bench_alloc_counts()
    private var rssEnd: UInt64 = 0

    init(peer: Peer) { self.peer = peer }

    /// Receiving thread: checks one payload.
    func receive(_ payload: Data) {
        guard let last = Payloads.checkStream(payload, expected: expected) else {
            fail("\(peer.rawValue): message \(expected) arrived wrong (\(payload.count) bytes)")
        }
        expected += 1
        if last {
            endedAt = bench_now_ns()
            allocationsEnd = bench_alloc_snapshot()
            rssEnd = bench_rss_bytes()
            finished.signal()
        }
    }

    /// Main thread: sends the stream through `send` (which may block on a full
    /// queue), waits for the receiver to see the last message, and checks the count.
    func measure(_ plan: StreamPlan, send: (Data) -> Void) -> StreamMeasurement {
        var startedAt: UInt64 = 0
        var allocationsBegin = bench_alloc_counts()
        var rssBegin: UInt64 = 0
        var sent: UInt64 = 0
        let warmup = UInt64(plan.warmup)
        repeat {
            if sent == warmup {
                allocationsBegin = bench_alloc_snapshot()
                rssBegin = bench_rss_bytes()
                startedAt = bench_now_ns()
            }
            let last = sent + 1 == UInt64(plan.maxMessages)
                || (sent > warmup && sent & 4095 == 0 && bench_now_ns() &- startedAt >= plan.budgetNanoseconds)
            send(Payloads.stream(sent, last: last))
            sent += 1
            if last { break }
        } while true
        finished.wait()
        if expected != sent { fail("\(peer.rawValue): receiver saw \(expected) messages, \(sent) sent") }
        return StreamMeasurement(messages: Int(sent - warmup), elapsedNanoseconds: endedAt &- startedAt,
                                 allocations: AllocationWindow(begin: allocationsBegin, end: allocationsEnd),
                                 rssBegin: rssBegin, rssEnd: rssEnd)
    }
}

/// `bench_window` as a Swift object: bounds an unbounded queue to `limit` messages in
/// flight (see CBenchmarkPeers.h).
final class CreditWindow: @unchecked Sendable {
    // Unchecked: the C window is a pair of atomics and an eventfd, made for exactly
    // one acquiring and one releasing thread.
    private let window: OpaquePointer

    init(limit: Int) {
        guard let window = bench_window_new(UInt32(limit)) else { fail("credit window allocation failed") }
        self.window = window
    }

    deinit { bench_window_free(window) }

    func acquire() { bench_window_acquire(window) }
    func release() { bench_window_release(window) }
}

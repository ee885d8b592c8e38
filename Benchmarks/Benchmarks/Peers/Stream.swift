import CBenchmarkPeers
import Foundation

/// The stream workloads (`throughput`, `asyncstream`) for the Swift peers: a sender
/// sends a stream of 64-byte `Data` payloads through the peer's queue to one receiver (a
/// thread, or a task consuming with `for await`), which checks every payload in order and
/// stamps the end when the last one arrives.
///
/// `@unchecked Sendable`: the receiving state is touched only by the receiver, one message
/// at a time (a consuming task may move between threads, but its steps are ordered); the
/// main thread reads it after `finished` is signalled.
final class StreamReceiver: @unchecked Sendable {
    private let peer: Peer
    private let finished = KernelEvent()
    private var expected: UInt64 = 0
    private var endedAt: UInt64 = 0
    private var allocationsEnd = bench_alloc_counts()
    private var rssEnd: UInt64 = 0

    init(peer: Peer) { self.peer = peer }

    /// Receiver: checks one payload.
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
        var schedule = StreamSchedule(plan)
        while let payload = schedule.next() { send(payload) }
        return waitForLast(schedule)
    }

    /// Main thread, once a sender (a task, say) went through `schedule`: waits for the
    /// receiver to see the last message, and checks the count. Blocks the calling thread, so
    /// never from a task: one waiting on the cooperative pool could starve the receiver.
    func waitForLast(_ schedule: StreamSchedule) -> StreamMeasurement {
        finished.wait()
        if expected != schedule.sent { fail("\(peer.rawValue): receiver saw \(expected) messages, \(schedule.sent) sent") }
        return StreamMeasurement(messages: Int(schedule.sent - schedule.warmup),
                                 elapsedNanoseconds: endedAt &- schedule.startedAt,
                                 allocations: AllocationWindow(begin: schedule.allocationsBegin, end: allocationsEnd),
                                 rssBegin: schedule.rssBegin, rssEnd: rssEnd)
    }
}

/// The sender's side of a stream: the payloads in order, until `maxMessages` or the budget
/// after the warm-up, with the clock and counters read where the measured window opens.
/// The same for a blocking sender thread and an async sender task.
struct StreamSchedule: Sendable {
    let warmup: UInt64
    private let maxMessages: UInt64
    private let budgetNanoseconds: UInt64
    private(set) var sent: UInt64 = 0
    private(set) var startedAt: UInt64 = 0
    private(set) var allocationsBegin = bench_alloc_counts()
    private(set) var rssBegin: UInt64 = 0
    private var done = false

    init(_ plan: StreamPlan) {
        warmup = UInt64(plan.warmup)
        maxMessages = UInt64(plan.maxMessages)
        budgetNanoseconds = plan.budgetNanoseconds
    }

    /// The next payload to send, counted as sent; nil after the last one.
    mutating func next() -> Data? {
        guard !done else { return nil }
        if sent == warmup {
            allocationsBegin = bench_alloc_snapshot()
            rssBegin = bench_rss_bytes()
            startedAt = bench_now_ns()
        }
        done = sent + 1 == maxMessages
            || (sent > warmup && sent & 4095 == 0 && bench_now_ns() &- startedAt >= budgetNanoseconds)
        let payload = Payloads.stream(sent, last: done)
        sent += 1
        return payload
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

import Foundation

/// The standard library's `AsyncStream`, fed by a thread through its continuation and
/// consumed with `for await`.
///
/// `AsyncStream` has no backpressure: its buffering policies are unbounded or lossy
/// (`bufferingOldest`/`bufferingNewest` drop messages, which the count check would reject).
/// It runs unbounded, bounded to the plan's 1024 in flight by the same credit window as the
/// other unbounded peers: the sender sleeps when 1024 are unconsumed, until half are.
enum AsyncStreamPeer {
    static func asyncStream(_ plan: StreamPlan) -> StreamMeasurement {
        let (payloads, continuation) = AsyncStream<Data>.makeStream()
        let stream = StreamReceiver(peer: .asyncStream)
        let window = CreditWindow(limit: plan.queueLimit)
        Task {
            for await payload in payloads {
                stream.receive(payload)
                window.release()
            }
        }
        let measurement = stream.measure(plan) { payload in
            window.acquire()
            guard case .enqueued = continuation.yield(payload) else { fail("AsyncStream: yield did not enqueue") }
        }
        continuation.finish()
        return measurement
    }
}

import Foundation

/// The throughput reference "Swift Data ring": the C ring + eventfd peer's algorithm
/// (`SwiftRing`: bounded single-producer single-consumer ring, Dekker handshake before each
/// sleep), written in Swift and carrying the same `Data` payloads every Swift row carries.
///
/// It is not a framework a daemon would use — one sender, one receiver, no run loop, no
/// delivery callbacks — but the least any Swift queue of `Data` can cost on this machine:
/// building each 64-byte `Data`, reference-counting it across threads and reading it back.
/// The table shows how much of the gap between the Swift rows and the C ring is the
/// payload type rather than the queue.
enum SwiftRingPeer {
    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let ring = SwiftRing<Data>(capacity: plan.queueLimit)
        let stream = StreamReceiver(peer: .swiftRing)
        let consumer = Thread { ring.consume { stream.receive($0) } }
        consumer.start()
        let measurement = stream.measure(plan) { ring.produce($0) }
        ring.finish()
        return measurement
    }
}

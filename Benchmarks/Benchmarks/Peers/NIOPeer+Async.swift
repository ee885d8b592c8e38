import Foundation
import NIOCore
import NIOPosix

/// SwiftNIO from async code: an actor on an event loop's executor (`EventLoop.executor`,
/// which NIOPosix's loops implement themselves, enqueueing jobs without a closure), and a
/// `NIOAsyncSequenceProducer` fed by a thread and consumed with `for await`.
extension NIOPeer {
    static func actorHop(_ plan: LatencyPlan) -> LatencyMeasurement {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let measurement = ActorHops.measure(plan, peer: .nio, target: EventLoopActor(executor: group.next().executor))
        shutDown(group)
        return measurement
    }

    /// The producer's high/low watermark strategy bounds the buffer at the plan's queue
    /// limit and asks for more once it is half drained — the same hysteresis as the credit
    /// window of the unbounded peers, and the way NIO's own channel bridges use it.
    static func asyncStream(_ plan: StreamPlan) -> StreamMeasurement {
        let demand = ProducerDemand()
        let producer = NIOAsyncSequenceProducer.makeSequence(
            elementType: Data.self,
            backPressureStrategy: NIOAsyncSequenceProducerBackPressureStrategies.HighLowWatermark(
                lowWatermark: plan.queueLimit / 2, highWatermark: plan.queueLimit),
            finishOnDeinit: false,
            delegate: demand)
        let stream = StreamReceiver(peer: .nio)
        let payloads = producer.sequence
        Task {
            for await payload in payloads { stream.receive(payload) }
        }
        let source = producer.source
        let measurement = stream.measure(plan) { payload in
            switch source.yield(payload) {
            case .produceMore: break
            case .stopProducing: demand.wait()
            case .dropped: fail("SwiftNIO: NIOAsyncSequenceProducer dropped a message")
            }
        }
        source.finish()
        return measurement
    }
}

/// An actor whose methods run on a NIO event loop.
private actor EventLoopActor: HopTarget {
    private let executor: any SerialExecutor
    private var counter = HopCounter(peer: .nio)

    init(executor: any SerialExecutor) { self.executor = executor }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    func answer(_ payload: Data) -> HopReply { counter.answer(payload) }
    var answered: UInt64 { counter.answered }
}

/// The producer's delegate: the sending thread sleeps in `wait()` after a yield said
/// `stopProducing`, until the consumer's `next()` calls `produceMore()`.
private final class ProducerDemand: NIOAsyncSequenceProducerDelegate {
    private let resumed = KernelEvent()

    func produceMore() { resumed.signal() }
    func didTerminate() {}

    func wait() { resumed.wait() }
}

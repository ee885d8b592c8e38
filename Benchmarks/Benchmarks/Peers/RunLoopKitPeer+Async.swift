import Foundation
import RunLoopKit

/// RunLoopKit from async code: an actor pinned to a resident thread with
/// `ResidentThread.executor`, and a port's messages consumed with `for await` over
/// `MessagePort.messages()`.
extension RunLoopKitPeer {
    static func actorHop(_ plan: LatencyPlan) -> LatencyMeasurement {
        let thread = ResidentThread(name: "actorhop-target")
        let measurement = ActorHops.measure(plan, peer: .runLoopKit, target: ThreadActor(executor: thread.executor))
        thread.stop()
        return measurement
    }

    /// The main thread sends with the blocking `send`, as the other `asyncstream` peers'
    /// sender threads yield, and waits in the port's queue at its bound; a task consumes.
    static func asyncStream(_ plan: StreamPlan) -> StreamMeasurement {
        let port = makePort(queueLimit: plan.queueLimit)
        let stream = consume(port, peer: .runLoopKit)
        let measurement = stream.measure(plan) { payload in send(to: port, payload, from: nil) }
        port.invalidate()
        return measurement
    }

    /// A task sends with `await port.send`, suspending at the queue's bound, to a task that
    /// consumes: both ends on the cooperative pool, no thread blocks.
    static func asyncSendStream(_ plan: StreamPlan) -> StreamMeasurement {
        let port = makePort(queueLimit: plan.queueLimit)
        let stream = consume(port, peer: .runLoopKitAsyncSend)
        let schedule = BlockingTask.run {
            var schedule = StreamSchedule(plan)
            while let payload = schedule.next() {
                do {
                    try await port.send(msgid: 1, components: [.data(payload)])
                } catch {
                    fail("RunLoopKit: async send failed: \(error)")
                }
            }
            return schedule
        }
        let measurement = stream.waitForLast(schedule)
        port.invalidate()
        return measurement
    }

    /// Starts a task that hands each of `port`'s messages to the returned receiver; it ends
    /// when the port is invalidated.
    private static func consume(_ port: MessagePort, peer: Peer) -> StreamReceiver {
        let stream = StreamReceiver(peer: peer)
        let messages = port.messages()
        Task {
            for await message in messages { stream.receive(data(of: message)) }
        }
        return stream
    }
}

/// An actor whose methods run on a resident thread's run loop.
private actor ThreadActor: HopTarget {
    private let executor: LoopExecutor
    private var counter = HopCounter(peer: .runLoopKit)

    init(executor: LoopExecutor) { self.executor = executor }

    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    func answer(_ payload: Data) -> HopReply { counter.answer(payload) }
    var answered: UInt64 { counter.answered }
}

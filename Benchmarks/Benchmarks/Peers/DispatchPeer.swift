import Dispatch
import Foundation

/// libdispatch: `async` onto serial queues, whose worker threads park in the kernel
/// (futex) when the queues are empty.
enum DispatchPeer {
    static func pingPong(_ plan: LatencyPlan) -> LatencyMeasurement {
        let initiator = DispatchQueue(label: "pingpong-initiator")
        let responder = DispatchQueue(label: "pingpong-responder")
        let trips = RoundTrips(peer: .dispatch, plan: plan)
        @Sendable func ping(_ payload: Data) {
            responder.async {
                trips.responderReceived(Payloads.sequence(of: payload))
                initiator.async { pong(payload) }
            }
        }
        @Sendable func pong(_ payload: Data) {
            if let next = trips.initiatorReceived(Payloads.sequence(of: payload)) {
                ping(Payloads.sequence(next))
            }
        }
        initiator.async { ping(Payloads.sequence(trips.firstPing())) }
        return trips.waitForCompletion()
    }

    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = DispatchQueue(label: "stream-receiver")
        let stream = StreamReceiver(peer: .dispatch)
        let window = CreditWindow(limit: plan.queueLimit)
        return stream.measure(plan) { payload in
            window.acquire()
            receiver.async {
                stream.receive(payload)
                window.release()
            }
        }
    }

    static func wakeUp(_ plan: LatencyPlan) -> LatencyMeasurement {
        let target = DispatchQueue(label: "wakeup-target")
        let wakeups = Wakeups(peer: .dispatch)
        return wakeups.measure(plan) { seq in target.async { wakeups.blockRan(seq) } }
    }
}

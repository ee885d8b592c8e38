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

    /// Four threads `async` onto one serial queue; each sender holds a quarter of the bound
    /// in its own credit window (a window has one acquiring thread).
    static func fanIn(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = DispatchQueue(label: "fanin-receiver")
        let fanIn = FanIn(peer: .dispatch, plan: plan)
        let windows = (0..<FanIn.senders).map { _ in CreditWindow(limit: plan.queueLimit / FanIn.senders) }
        return fanIn.measure { sender, payload in
            windows[sender].acquire()
            receiver.async { windows[fanIn.receive(payload)].release() }
        }
    }

    static func wakeUp(_ plan: LatencyPlan) -> LatencyMeasurement {
        let target = DispatchQueue(label: "wakeup-target")
        let wakeups = Wakeups(peer: .dispatch)
        return wakeups.measure(plan) { seq in target.async { wakeups.blockRan(seq) } }
    }
}

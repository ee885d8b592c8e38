import Foundation
import NIOCore
import NIOPosix

/// SwiftNIO: `EventLoop.execute` between event loops of their own
/// MultiThreadedEventLoopGroup (one thread each), which sleep in epoll when idle.
enum NIOPeer {
    static func pingPong(_ plan: LatencyPlan) -> LatencyMeasurement {
        let initiatorGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let responderGroup = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let initiator = initiatorGroup.next()
        let responder = responderGroup.next()
        let trips = RoundTrips(peer: .nio, plan: plan)
        @Sendable func ping(_ payload: Data) {
            responder.execute {
                trips.responderReceived(Payloads.sequence(of: payload))
                initiator.execute { pong(payload) }
            }
        }
        @Sendable func pong(_ payload: Data) {
            if let next = trips.initiatorReceived(Payloads.sequence(of: payload)) {
                ping(Payloads.sequence(next))
            }
        }
        initiator.execute { ping(Payloads.sequence(trips.firstPing())) }
        let measurement = trips.waitForCompletion()
        shutDown(initiatorGroup, responderGroup)
        return measurement
    }

    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let receiver = group.next()
        let stream = StreamReceiver(peer: .nio)
        let window = CreditWindow(limit: plan.queueLimit)
        let measurement = stream.measure(plan) { payload in
            window.acquire()
            receiver.execute {
                stream.receive(payload)
                window.release()
            }
        }
        shutDown(group)
        return measurement
    }

    /// Four threads `execute` onto one event loop; each sender holds a quarter of the bound
    /// in its own credit window (a window has one acquiring thread).
    static func fanIn(_ plan: StreamPlan) -> StreamMeasurement {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let receiver = group.next()
        let fanIn = FanIn(peer: .nio, plan: plan)
        let windows = (0..<FanIn.senders).map { _ in CreditWindow(limit: plan.queueLimit / FanIn.senders) }
        let measurement = fanIn.measure { sender, payload in
            windows[sender].acquire()
            receiver.execute { windows[fanIn.receive(payload)].release() }
        }
        shutDown(group)
        return measurement
    }

    static func wakeUp(_ plan: LatencyPlan) -> LatencyMeasurement {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let target = group.next()
        let wakeups = Wakeups(peer: .nio)
        let measurement = wakeups.measure(plan) { seq in target.execute { wakeups.blockRan(seq) } }
        shutDown(group)
        return measurement
    }

    static func shutDown(_ groups: MultiThreadedEventLoopGroup...) {
        for group in groups {
            do { try group.syncShutdownGracefully() } catch { fail("SwiftNIO: shutdown failed: \(error)") }
        }
    }
}

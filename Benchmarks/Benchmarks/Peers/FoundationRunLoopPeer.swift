import CBenchmarkPeers
import Foundation

/// Foundation's RunLoop on Linux, used the way a daemon would use it to hand work to
/// another thread: `RunLoop.perform` followed by `CFRunLoopWakeUp` (perform alone only
/// enqueues; a sleeping loop would never run the block).
enum FoundationRunLoopPeer {
    static func pingPong(_ plan: LatencyPlan) -> LatencyMeasurement {
        let initiator = FoundationLoopThread(name: "pingpong-initiator")
        let responder = FoundationLoopThread(name: "pingpong-responder")
        let trips = RoundTrips(peer: .foundation, plan: plan)
        @Sendable func ping(_ payload: Data) {
            responder.perform {
                trips.responderReceived(Payloads.sequence(of: payload))
                initiator.perform { pong(payload) }
            }
        }
        @Sendable func pong(_ payload: Data) {
            if let next = trips.initiatorReceived(Payloads.sequence(of: payload)) {
                ping(Payloads.sequence(next))
            }
        }
        initiator.perform { ping(Payloads.sequence(trips.firstPing())) }
        let measurement = trips.waitForCompletion()
        initiator.stop()
        responder.stop()
        return measurement
    }

    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = FoundationLoopThread(name: "stream-receiver")
        let stream = StreamReceiver(peer: .foundation)
        let window = CreditWindow(limit: plan.queueLimit)
        let measurement = stream.measure(plan) { payload in
            window.acquire()
            receiver.perform {
                stream.receive(payload)
                window.release()
            }
        }
        receiver.stop()
        return measurement
    }

    static func wakeUp(_ plan: LatencyPlan) -> LatencyMeasurement {
        let target = FoundationLoopThread(name: "wakeup-target")
        let wakeups = Wakeups(peer: .foundation)
        let measurement = wakeups.measure(plan) { seq in target.perform { wakeups.blockRan(seq) } }
        target.stop()
        return measurement
    }
}

/// A Foundation `Thread` running its `RunLoop` in the default mode, kept alive by a
/// timer that never fires (a run loop with no source or timer returns at once).
///
/// `@unchecked Sendable`: `runLoop` and `cfRunLoop` are written once on the thread
/// before `ready` is signalled and only read afterwards; `running` is touched only on
/// the loop's own thread. RunLoop.perform and CFRunLoopWakeUp are documented as
/// callable from any thread.
final class FoundationLoopThread: @unchecked Sendable {
    private var runLoop: RunLoop?
    private var cfRunLoop: UnsafeMutableRawPointer?
    private var running = true
    private let ready = KernelEvent()
    private let exited = KernelEvent()

    init(name: String) {
        let thread = Thread { [self] in
            let loop = RunLoop.current
            loop.add(Timer(fire: .distantFuture, interval: 0, repeats: false) { _ in }, forMode: .default)
            runLoop = loop
            cfRunLoop = bench_cf_runloop_current()
            ready.signal()
            while running {
                _ = loop.run(mode: .default, before: .distantFuture)
            }
            exited.signal()
        }
        thread.name = name
        thread.start()
        ready.wait()
    }

    /// Runs `block` on the loop's thread: enqueue, then wake the loop.
    func perform(_ block: @escaping @Sendable () -> Void) {
        runLoop!.perform(block)
        bench_cf_runloop_wake_up(cfRunLoop)
    }

    /// Ends the loop and waits for its thread to leave it.
    func stop() {
        perform { [self] in
            running = false
            bench_cf_runloop_stop(cfRunLoop)
        }
        exited.wait()
    }
}

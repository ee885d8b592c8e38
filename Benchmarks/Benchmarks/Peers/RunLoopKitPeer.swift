import Foundation
import Synchronization
import RunLoopKit

/// RunLoopKit: MessagePorts scheduled on ResidentThreads' run loops, and
/// `ResidentThread.perform`.
enum RunLoopKitPeer {
    /// How long a send may wait for queue space. Ping-pong never has more than one
    /// message queued; the stream blocks only while the receiver drains a full queue.
    static let sendTimeout = Duration.seconds(30)

    /// Each thread has a port in its default mode; a ping carries the initiator's port
    /// as its reply port, and the responder answers through `message.replyPort`.
    /// `idle`: the `idle` workload, with that load of `IdleItems` in both threads' default mode.
    /// `loopHealth`: the loop-health reference row (`LoopHealthOn`). `firstPing`: what the first
    /// ping is sent within (the trace-context row's context; each reply and ping after it is sent
    /// from a handler, within the context of the message it answers).
    static func pingPong(_ plan: LatencyPlan, idle load: IdleItems.Load? = nil, loopHealth: Bool = false,
                         firstPing: @escaping @Sendable (() -> Void) -> Void = { $0() }) -> LatencyMeasurement {
        let initiator = ResidentThread(name: "pingpong-initiator")
        let responder = ResidentThread(name: "pingpong-responder")
        let idle = load.map { [IdleItems($0, on: initiator.runLoop), IdleItems($0, on: responder.runLoop)] } ?? []
        let health = loopHealth ? LoopHealthOn([initiator.runLoop, responder.runLoop]) : nil
        defer { health?.off() }
        let initiatorPort = makePort()
        let responderPort = makePort()
        let trips = RoundTrips(peer: loopHealth ? .runLoopKitHealth : .runLoopKit, plan: plan)
        @Sendable func ping(_ seq: UInt64) {
            send(to: responderPort, Payloads.sequence(seq), from: initiatorPort)
        }
        responderPort.setHandler { message in
            let payload = data(of: message)
            trips.responderReceived(Payloads.sequence(of: payload))
            guard let replyPort = message.replyPort else { fail("RunLoopKit: a ping arrived without its reply port") }
            send(to: replyPort, payload, from: nil)
        }
        initiatorPort.setHandler { message in
            if let next = trips.initiatorReceived(Payloads.sequence(of: data(of: message))) {
                ping(next)
            }
        }
        responder.runLoop.add(responderPort, forMode: .default)
        initiator.runLoop.add(initiatorPort, forMode: .default)
        perform(on: initiator) { firstPing { ping(trips.firstPing()) } }
        let measurement = trips.waitForCompletion()
        initiatorPort.invalidate()
        responderPort.invalidate()
        for items in idle { items.remove() }
        initiator.stop()
        responder.stop()
        return measurement
    }

    /// The main thread sends to a port with a bounded queue, scheduled on a resident
    /// thread whose handler checks each message.
    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = ResidentThread(name: "stream-receiver")
        let port = makePort(queueLimit: plan.queueLimit)
        let stream = StreamReceiver(peer: .runLoopKit)
        port.setHandler { message in stream.receive(data(of: message)) }
        receiver.runLoop.add(port, forMode: .default)
        let measurement = stream.measure(plan) { payload in send(to: port, payload, from: nil) }
        port.invalidate()
        receiver.stop()
        return measurement
    }

    /// `throughput` received by a batch handler: each pass's messages in one call, each taken out
    /// of the queue and owned by the receiver, checked as the handler's row checks them.
    static func batchThroughput(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = ResidentThread(name: "stream-receiver")
        let port = makePort(queueLimit: plan.queueLimit)
        let stream = StreamReceiver(peer: .runLoopKitBatch)
        port.setBatchHandler { batch in
            while let message = batch.next() { stream.receive(data(of: message)) }
        }
        receiver.runLoop.add(port, forMode: .default)
        let measurement = stream.measure(plan) { payload in send(to: port, payload, from: nil) }
        port.invalidate()
        receiver.stop()
        return measurement
    }

    /// Four sender threads send to one port with the plan's bound, scheduled on a resident
    /// thread; each blocks in `send` while the queue is full.
    static func fanIn(_ plan: StreamPlan) -> StreamMeasurement {
        let receiver = ResidentThread(name: "fanin-receiver")
        let port = makePort(queueLimit: plan.queueLimit)
        let fanIn = FanIn(peer: .runLoopKit, plan: plan)
        port.setHandler { message in fanIn.receive(data(of: message)) }
        receiver.runLoop.add(port, forMode: .default)
        let measurement = fanIn.measure { _, payload in send(to: port, payload, from: nil) }
        port.invalidate()
        receiver.stop()
        return measurement
    }

    static func wakeUp(_ plan: LatencyPlan, loopHealth: Bool = false) -> LatencyMeasurement {
        let target = ResidentThread(name: "wakeup-target")
        // The poster's loop never runs: watched, it is idle throughout.
        let health = loopHealth ? LoopHealthOn([target.runLoop, ThreadRunLoop.current]) : nil
        defer { health?.off() }
        let wakeups = Wakeups(peer: loopHealth ? .runLoopKitHealth : .runLoopKit)
        let measurement = wakeups.measure(plan) { seq in perform(on: target) { wakeups.blockRan(seq) } }
        target.stop()
        return measurement
    }

    /// Ping-pong ports keep the default queue limit; the stream's is the plan's bound.
    static func makePort(queueLimit: Int? = nil) -> MessagePort {
        do {
            if let queueLimit { return try MessagePort(queueLimit: queueLimit) }
            return try MessagePort()
        } catch {
            fail("RunLoopKit: MessagePort(): \(error)")
        }
    }

    static func send(to port: MessagePort, _ payload: Data, from replyPort: MessagePort?) {
        do {
            try port.send(msgid: 1, components: [.data(payload)], from: replyPort, timeout: sendTimeout)
        } catch {
            fail("RunLoopKit: send failed: \(error)")
        }
    }

    private static func perform(on thread: ResidentThread, _ block: @escaping @Sendable () -> Void) {
        do { try thread.perform(block) } catch { fail("RunLoopKit: perform failed: \(error)") }
    }

    /// The one `.data` component every message of these benchmarks carries (read as a receiver
    /// of single-payload messages does, with `data`: no array is built for it).
    static func data(of message: MessagePort.Message) -> Data {
        guard message.msgid == 1, let payload = message.data, message.data(at: 1) == nil, message.port(at: 1) == nil else {
            fail("RunLoopKit: a message arrived with msgid \(message.msgid) and \(message.components.count) components")
        }
        return payload
    }
}

/// The loop-health reference: a slow-callout handler (10 ms) on each loop and one `HangWatch`
/// (10 ms) over all of them, as the loop-health bar measures. The handlers only count:
/// on a shared VM a preempted callout can take 10 ms, which says nothing about the hook's cost.
final class LoopHealthOn: Sendable {
    static let threshold = Duration.milliseconds(10)
    private let loops: [ThreadRunLoop]
    private let watch: HangWatch
    private let reports: Reports

    private final class Reports: Sendable {
        let count = Atomic<Int>(0)
    }

    init(_ loops: [ThreadRunLoop]) {
        self.loops = loops
        let reports = Reports()
        self.reports = reports
        for loop in loops {
            loop.setSlowCalloutHandler(threshold: Self.threshold) { _ in reports.count.add(1, ordering: .relaxed) }
        }
        watch = HangWatch(loops: loops, threshold: Self.threshold) { _, _ in reports.count.add(1, ordering: .relaxed) }
    }

    func off() {
        watch.stop()
        for loop in loops { loop.setSlowCalloutHandler(threshold: Self.threshold, nil) }
        let count = reports.count.load(ordering: .relaxed)
        if count > 0 { FileHandle.standardError.write(Data("loop health: \(count) report(s) of 10 ms stalls (preemption)\n".utf8)) }
    }
}

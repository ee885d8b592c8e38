import CBenchmarkPeers
import Foundation
import RunLoopKit

/// The scale rows (`payloads`, `xpayloads`, `threads`): RunLoopKit's ping-pong measured at
/// several payload sizes and thread counts, each point summarised as a `ScalePoint`.
extension RunLoopKitPeer {
    /// In-process payloads: 8 B to 1 MiB.
    static let payloadSizes = [8, 4_096, 65_536, 1 << 20]
    /// Cross-process payloads: 8 B to the largest DATA component one frame holds
    /// (Protocols/port-message-frame.md §3.4: 65,536 − 16 − 8 bytes).
    static let crossProcessPayloadSizes = [8, 4_096, 32_768, 65_512]
    /// Pairs of resident threads ping-ponging at once.
    static let threadPairs = [1, 16, 256]

    static func scale(_ workload: Workload, _ plan: LatencyPlan) -> ScaleMeasurement {
        var points: [ScalePoint] = []
        var messages = 0
        var allocations = bench_alloc_counts()
        func add(_ parameter: Int, _ measurement: LatencyMeasurement, roundTripsPerSecond: Double? = nil) {
            let summary = LatencySummary(measurement)
            points.append(ScalePoint(parameter: parameter, p50: summary.p50, p99: summary.p99,
                                     roundTripsPerSecond: roundTripsPerSecond ?? 1e6 / summary.mean,
                                     allocationsPerMessage: measurement.allocations.allocationsPerMessage(measurement.messages),
                                     bytesPerMessage: measurement.allocations.bytesPerMessage(measurement.messages)))
            messages += measurement.messages
            allocations.add(measurement.allocations)
        }
        switch workload {
        case .payloads:
            for bytes in payloadSizes { add(bytes, payloadPingPong(plan, bytes: bytes)) }
        case .xpayloads:
            for bytes in crossProcessPayloadSizes { add(bytes, crossProcessPingPong(plan, payloadBytes: bytes)) }
        case .threads:
            for pairs in threadPairs {
                let (measurement, rate) = ThreadPairs.measure(plan, pairs: pairs)
                add(pairs, measurement, roundTripsPerSecond: rate)
            }
        default:
            fail("\(workload.rawValue) is not a scale row")
        }
        return ScaleMeasurement(points: points, messages: messages,
                                allocations: AllocationWindow(begin: bench_alloc_counts(), end: allocations))
    }

    /// `pingpong` with one shared block of `bytes` bytes as its only component; the sequence
    /// number travels as the msgid, so the block itself is never rebuilt or copied.
    static func payloadPingPong(_ plan: LatencyPlan, bytes: Int) -> LatencyMeasurement {
        let initiator = ResidentThread(name: "payload-initiator")
        let responder = ResidentThread(name: "payload-responder")
        let initiatorPort = makePort()
        let responderPort = makePort()
        let block = Payloads.block(bytes)
        let trips = RoundTrips(peer: .runLoopKit, plan: plan)
        responderPort.setHandler { message in
            trips.responderReceived(blockSequence(of: message, bytes: bytes))
            guard let replyPort = message.replyPort, let payload = message.data else {
                fail("RunLoopKit: a ping arrived without its reply port or its block")
            }
            sendBlock(to: replyPort, msgid: message.msgid, [.data(payload)], from: nil)
        }
        initiatorPort.setHandler { message in
            if let next = trips.initiatorReceived(blockSequence(of: message, bytes: bytes)) {
                sendBlock(to: responderPort, msgid: UInt32(truncatingIfNeeded: next), [.data(block)], from: initiatorPort)
            }
        }
        responder.runLoop.add(responderPort, forMode: .default)
        initiator.runLoop.add(initiatorPort, forMode: .default)
        do {
            try initiator.perform {
                sendBlock(to: responderPort, msgid: UInt32(truncatingIfNeeded: trips.firstPing()), [.data(block)],
                          from: initiatorPort)
            }
        } catch {
            fail("RunLoopKit: perform failed: \(error)")
        }
        let measurement = trips.waitForCompletion()
        initiatorPort.invalidate()
        responderPort.invalidate()
        initiator.stop()
        responder.stop()
        return measurement
    }

    /// The sequence number of a scale row's message (its msgid), once its one component was
    /// checked as the block of `bytes` bytes; nil when anything is wrong.
    static func blockSequence(of message: MessagePort.Message, bytes: Int) -> UInt64? {
        guard let payload = message.data, message.data(at: 1) == nil, message.port(at: 1) == nil,
              Payloads.checkBlock(payload, bytes: bytes) else { return nil }
        return UInt64(message.msgid)
    }

    static func sendBlock(to port: MessagePort, msgid: UInt32, _ components: [MessagePort.Message.Component],
                          from replyPort: MessagePort?) {
        do {
            try port.send(msgid: msgid, components: components, from: replyPort, timeout: sendTimeout)
        } catch {
            fail("RunLoopKit: send failed: \(error)")
        }
    }
}

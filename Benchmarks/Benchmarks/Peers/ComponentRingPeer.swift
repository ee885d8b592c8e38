import Foundation
import RunLoopKit

/// The throughput reference "Swift [Component] ring": the Swift Data ring (`SwiftRing`)
/// carrying what MessagePort's binding API makes every sender build instead of a bare `Data`:
/// the components array `[MessagePort.Message.Component]` holding `.data(payload)`.
///
/// `send(msgid:components:from:timeout:)` takes an array, so each message sent through a port
/// costs at least the array's allocation beside the payload's; the Data ring carries no array
/// and cannot show that. The producer builds
/// `[.data(payload)]` per message, as a sender does; the consumer reads `components[0]`, as a
/// handler does. The throughput bar reads MessagePort against the Data ring and reports this
/// row beside it: the least a queue of the binding's components costs on this machine.
enum ComponentRingPeer {
    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        let ring = SwiftRing<[MessagePort.Message.Component]>(capacity: plan.queueLimit)
        let stream = StreamReceiver(peer: .componentRing)
        let consumer = Thread {
            ring.consume { components in
                guard components.count == 1, case .data(let payload) = components[0] else {
                    fail("\(Peer.componentRing.rawValue): a message arrived with \(components.count) components, not one .data")
                }
                stream.receive(payload)
            }
        }
        consumer.start()
        let measurement = stream.measure(plan) { payload in ring.produce([.data(payload)]) }
        ring.finish()
        return measurement
    }
}

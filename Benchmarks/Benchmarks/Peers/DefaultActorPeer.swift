import Foundation

/// Swift's default actor: no custom executor, so its methods run on the cooperative pool. A
/// call from a pool task to an idle default actor usually runs on the caller's own thread
/// (the runtime switches executors in place), so its row shows the hop with no thread
/// hand-off at all: the floor under the two rows that cross to a loop thread.
enum DefaultActorPeer {
    static func actorHop(_ plan: LatencyPlan) -> LatencyMeasurement {
        ActorHops.measure(plan, peer: .defaultActor, target: PoolActor())
    }
}

private actor PoolActor: HopTarget {
    private var counter = HopCounter(peer: .defaultActor)

    func answer(_ payload: Data) -> HopReply { counter.answer(payload) }
    var answered: UInt64 { counter.answered }
}

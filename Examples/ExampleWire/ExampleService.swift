import Distributed
import RunLoopKitDistributed

/// The example service as a distributed actor: what `Wire.request` asks of example-daemon's
/// port, as a typed call (`example-client --distributed`). example-daemon publishes it as
/// `Wire.actorName(for:)` of its service's name, under the same access policy; its calls run
/// on the cooperative pool, beside the port's workers.
public distributed actor ExampleService {
    public typealias ActorSystem = PortActorSystem

    public init(actorSystem: PortActorSystem) {
        self.actorSystem = actorSystem
    }

    /// `rounds` rounds of the service's work over `key` (`Wire.work`).
    public distributed func work(key: UInt64, rounds: UInt64) -> UInt64 {
        Wire.work(key: key, rounds: rounds)
    }
}

extension Wire {
    /// The name `ExampleService` is published under beside the service port named `name`.
    public static func actorName(for name: String) -> String {
        name + ".actor"
    }
}

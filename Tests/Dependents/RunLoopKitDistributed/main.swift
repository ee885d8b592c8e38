// A one-file user of RunLoopKitDistributed: an actor system that publishes nothing.
import RunLoopKitDistributed

let system = PortActorSystem()
print("actor id: \(PortActorID.named("dependent"))")
system.shutdown()

// A one-file user of RunLoopKitDistributed: a distributed actor published under a name, and
// called through its port by a second system of the same process, as another process would.
#if canImport(Glibc)
import Glibc
#endif
import Distributed
import RunLoopKitDistributed

distributed actor Greeter {
    typealias ActorSystem = PortActorSystem

    distributed func greet(_ name: String) -> String {
        "hello, \(name)"
    }
}

let server = PortActorSystem()
let client = PortActorSystem()
client.callTimeout = .seconds(5)
let name = "dependent-\(getpid())"
try server.publish(Greeter(actorSystem: server), as: name)
let greeter = try Greeter.resolve(id: .named(name), using: client)
let greeting = try await greeter.greet("dependent")
precondition(greeting == "hello, dependent", "the published greeter answered \(greeting)")
print("\(PortActorID.named(name)): \(greeting)")
client.shutdown()
server.shutdown()

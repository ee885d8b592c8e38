// `@Resolvable` protocols: a client that knows only the protocol calls the published actor,
// and a target the actor does not have is refused with `.unknownTarget` — never run.

import Distributed
import DistributedPeer
import Glibc
import RunLoopKit
import RunLoopKitDistributed
import Testing

/// The implementation of `Greeter`: in this process only. The peer knows the protocol.
distributed actor TestGreeter: Greeter {
    typealias ActorSystem = PortActorSystem

    distributed func greet(_ name: String) -> String {
        "hello, \(name), from \(getpid())"
    }
}

@Suite("Distributed actors: @Resolvable protocols and unknown targets", .timeLimit(.minutes(2)))
struct ResolvableTests {
    @Test("a client that knows only a @Resolvable protocol calls the published actor with $Proto.resolve")
    func clientKnowingOnlyTheProtocol() async throws {
        let system = PortActorSystem()
        defer { system.shutdown() }
        let name = uniquePrefix("greeter")
        try system.publish(TestGreeter(actorSystem: system), as: name)
        let client = try PeerProcess(["greet", name, "peer"])
        #expect(await client.exitStatus() == 0, "\(client.output)")
        #expect(client.output == "greeting: hello, peer, from \(getpid())\n")
    }

    @Test("a target of a protocol the actor does not conform to, or of another type, is .unknownTarget and does not run")
    func foreignTargetsAreRefused() async throws {
        let system = PortActorSystem()
        defer { system.shutdown() }
        let name = uniquePrefix("foreign")
        let greeter = TestGreeter(actorSystem: system)
        try system.publish(greeter, as: name)
        // `Counter` is a @Resolvable protocol the greeter does not conform to: the runtime would
        // run its stub's body on the greeter (a trap) if the system let the call through.
        let counting = try PeerProcess(["count", name])
        #expect(await counting.exitStatus() == 0, "\(counting.output)")
        #expect(counting.output == "error: \(PortActorSystemError.unknownTarget("DistributedPeer.$Counter.increment()"))\n")
        // A distributed function of another type (`Store.twice`), which would read the greeter
        // as a `Store`.
        let twice = try PeerProcess(["twice", name])
        #expect(await twice.exitStatus() == 0, "\(twice.output)")
        #expect(twice.output == "error: \(PortActorSystemError.unknownTarget("DistributedPeer.Store.twice(_:)"))\n")
        // The greeter still answers.
        let greeting = try PeerProcess(["greet", name, "again"])
        #expect(await greeting.exitStatus() == 0)
        #expect(greeting.output == "greeting: hello, again, from \(getpid())\n")
    }

    @Test("a call to an actor of this system is direct: resolving its name gives the actor itself")
    func localCallsAreDirect() async throws {
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = Store(actorSystem: system)
        let name = uniquePrefix("local")
        try system.publish(store, as: name)
        let byName = try Store.resolve(id: .named(name), using: system)
        #expect(byName === store)
        #expect(__isLocalActor(byName))
        let byID = try Store.resolve(id: store.id, using: system)
        #expect(byID === store)
        // Direct: the call has no caller (a call through a port from this process would not
        // either, but it would not be the same object).
        #expect(try await byName.caller() == nil)
        #expect(try await byName.twice(4) == 8)
        // An identity another system assigned is not reachable.
        let other = PortActorSystem()
        defer { other.shutdown() }
        #expect(throws: PortActorSystemError.actorNotFound(store.id.description)) {
            try Store.resolve(id: store.id, using: other)
        }
    }
}

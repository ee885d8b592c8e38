// The other process of the distributed-actor tests (RunLoopKitDistributedTests).
//
//     DistributedPeer serve PREFIX [UID]   publishes PREFIX.store (for uid UID only, if given),
//                                          PREFIX.pinned, PREFIX.gate, PREFIX.opener and
//                                          PREFIX.control; prints "ready PID"; runs until killed
//     DistributedPeer greet NAME WHO       calls the Greeter published as NAME knowing only the
//                                          protocol; prints "greeting: …"
//     DistributedPeer count NAME           calls it as a Counter (a protocol it does not
//                                          conform to); prints "error: …"
//     DistributedPeer twice NAME           calls it as a Store; prints "error: …"
//
// Every line goes to stdout, flushed; a failure prints "failed: …" and exits 1.

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Distributed
import RunLoopKit
import RunLoopKitDistributed

@main
enum DistributedPeer {
    static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        let system = PortActorSystem()
        do {
            switch (arguments.first, arguments.count) {
            case ("serve", 2), ("serve", 3):
                try serve(prefix: arguments[1], onlyUID: arguments.count == 3 ? UInt32(arguments[2]) : nil, system: system)
            case ("greet", 3):
                let greeter = try $Greeter.resolve(id: .named(arguments[1]), using: system)
                say("greeting: \(try await greeter.greet(arguments[2]))")
            case ("count", 2):
                let counter = try $Counter.resolve(id: .named(arguments[1]), using: system)
                do { say("counted: \(try await counter.increment())") } catch { say("error: \(error)") }
            case ("twice", 2):
                let store = try Store.resolve(id: .named(arguments[1]), using: system)
                do { say("twice: \(try await store.twice(2))") } catch { say("error: \(error)") }
            default:
                say("failed: usage: DistributedPeer serve PREFIX [UID] | greet NAME WHO | count NAME | twice NAME")
                exit(2)
            }
        } catch {
            say("failed: \(error)")
            exit(1)
        }
        system.shutdown()
        exit(0)
    }

    /// Publishes the peer's actors and parks the main thread: the system's threads serve them.
    static func serve(prefix: String, onlyUID: UInt32?, system: PortActorSystem) throws -> Never {
        let latch = GateLatch()
        try system.publish(Store(actorSystem: system), as: prefix + ".store", access: onlyUID.map { .users([$0]) } ?? .sameUser)
        try system.publish(PinnedStore(actorSystem: system), as: prefix + ".pinned")
        try system.publish(Gate(actorSystem: system, latch: latch), as: prefix + ".gate")
        try system.publish(Opener(actorSystem: system, latch: latch), as: prefix + ".opener")
        try system.publish(Control(actorSystem: system), as: prefix + ".control")
        say("ready \(getpid())")
        while true { pause() }
    }

    static func say(_ line: String) {
        var bytes = Array((line + "\n").utf8)
        _ = write(STDOUT_FILENO, &bytes, bytes.count)
    }
}

import Distributed
import Glibc
import RunLoopKit
import RunLoopKitDistributed

/// An error both processes know: it is `Codable`, so the caller catches it as itself.
struct NotWelcome: Error, Codable {
    var name: String
}

// The actor both processes know. Its distributed functions are what other processes may call.
distributed actor Greeter {
    typealias ActorSystem = PortActorSystem
    private var greetings = 0

    distributed func greet(_ name: String) throws -> String {
        guard name != "mallory" else { throw NotWelcome(name: name) }
        greetings += 1
        // Who called, as the kernel reported it with the call (nil for a call from this process).
        let caller = PortActorSystem.caller?.uid == getuid() ? "a process of my user" : "elsewhere"
        return "hello, \(name) (greeting \(greetings), for \(caller))"
    }
}

// One program, two roles: run without arguments it publishes a Greeter, then starts itself
// again as the client with the name on its command line.
let arguments = CommandLine.arguments
if arguments.count == 2 {
    // The client: it resolves the actor by name and calls it as if it were local.
    let system = PortActorSystem()
    system.callTimeout = .seconds(10)
    let greeter = try Greeter.resolve(id: .named(arguments[1]), using: system)
    print("client:", try await greeter.greet("client"))
    do {
        _ = try await greeter.greet("mallory")
    } catch let error as NotWelcome {
        print("client: \(error.name) is not welcome")
    }
    system.shutdown()
    exit(0)
}

// The daemon: one actor, published under a name only processes of this user may call.
let system = PortActorSystem()
let name = "com.example.greeter.\(getpid())"             // names are host-wide per user: one per run
try system.publish(Greeter(actorSystem: system), as: name, access: .sameUser)
print("daemon: published the greeter")

var client: pid_t = 0
let words = ["/proc/self/exe", name]
let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
guard posix_spawn(&client, "/proc/self/exe", nil, nil, argv, environ) == 0 else { fatalError("posix_spawn failed") }
argv.forEach { free($0) }
var status: Int32 = 0
waitpid(client, &status, 0)                              // the calls run meanwhile, on the system's threads
print("daemon: client exited with status", (status >> 8) & 0xff)
system.shutdown()                                        // unpublishes the name

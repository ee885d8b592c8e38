#if ServiceLifecycle
// ServiceHost: a daemon built the swift-service-lifecycle way — a ServiceGroup whose services are
// ResidentThreadServices, run by `ThreadRunLoop.main.run(group)` on the main thread — for the
// graceful-shutdown tests, which send it SIGTERM. One scenario per invocation:
//
//   drain     two services, each with messages queued on its port while its thread is held
//             busy; a third service releases the threads only once graceful shutdown has
//             begun, so the messages are still in flight when the group starts shutting down.
//   timeout   one service whose port has no handler, so its queue never drains; the drain ends
//             at the service's (short) timeout and the queued messages are discarded.
//   wrong-thread  ThreadRunLoop.main.run(group) called on a resident thread: a precondition
//             failure naming the mistake.
//   run-twice one ResidentThreadService given to a group twice: the second run() is a
//             precondition failure naming the mistake.
//
// Output: "ready" once every service runs (the test then sends SIGTERM), then "key: value"
// lines, checked by the test; exit 0 when the group finished without error.

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import RunLoopKit
import RunLoopKitServiceLifecycle
import ServiceLifecycle
import Synchronization

func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = write(STDOUT_FILENO, &bytes, bytes.count)
}

/// gettid(2), which the Glibc module does not export.
nonisolated(unsafe) let gettid = unsafeBitCast(dlsym(nil, "gettid"), to: (@convention(c) () -> pid_t).self)

@MainActor func mainActorRunsOnMainThread() -> Bool { gettid() == getpid() }

final class Tally: Sendable {
    private let count = Atomic<Int>(0)
    func add() { count.add(1, ordering: .relaxed) }
    var value: Int { count.load(ordering: .relaxed) }
}

/// A port on a service's thread that counts what its handler receives.
final class CountingPort: Sendable {
    let port: MessagePort
    let sent: Int
    private let delivered = Tally()

    init(on service: ResidentThreadService, sending count: Int, handled: Bool) throws {
        port = try MessagePort()
        sent = count
        if handled {
            port.setHandler { [delivered] _ in delivered.add() }
        }
        service.add(port)
    }

    /// Queues the messages from this (the main) thread; they stay queued while the service's
    /// thread is busy or while the port has no handler.
    func send() throws {
        for index in 0..<sent {
            try port.send(msgid: UInt32(index), timeout: .seconds(10))
        }
    }

    var deliveredCount: Int { delivered.value }
}

/// Holds a service's thread in a block until released.
final class Hold: Sendable {
    private let released = DispatchSemaphore(value: 0)

    /// Returns once the thread is inside the block, so nothing sent afterwards is delivered
    /// until `release()`.
    init(_ service: ResidentThreadService) throws {
        let entered = DispatchSemaphore(value: 0)
        try service.thread.perform { [released] in
            entered.signal()
            released.wait()
        }
        entered.wait()
    }

    func release() { released.signal() }
}

/// The last service of the group, so the first to hear of graceful shutdown (a group shuts its
/// services down in reverse order): it says "ready" once the group runs, and releases the held
/// threads when shutdown begins.
struct Conductor: Service, CustomStringConvertible {
    let holds: [Hold]

    func run() async throws {
        say("main actor on main thread: \(await mainActorRunsOnMainThread())")
        say("ready")
        try await gracefulShutdown()
        say("graceful shutdown began")
        for hold in holds { hold.release() }
    }

    var description: String { "Conductor" }
}

func report(_ name: String, _ service: ResidentThreadService, _ counting: CountingPort) {
    say("\(name) delivered: \(counting.deliveredCount)")
    say("\(name) sent: \(counting.sent)")
    say("\(name) discarded: \(counting.port.discardedCount)")
    say("\(name) thread finished: \(service.thread.isFinished)")
    say("\(name) port valid: \(counting.port.isValid)")
}

do {
    switch CommandLine.arguments.dropFirst().first {
    case "drain":
        let first = ResidentThreadService(name: "svc-first", drainTimeout: .seconds(60))
        let second = ResidentThreadService(name: "svc-second", drainTimeout: .seconds(60))
        let firstPort = try CountingPort(on: first, sending: 1000, handled: true)
        let secondPort = try CountingPort(on: second, sending: 1000, handled: true)
        let holds = [try Hold(first), try Hold(second)]
        try firstPort.send()
        try secondPort.send()
        say("queued before shutdown: \(firstPort.port.queuedCount + secondPort.port.queuedCount)")
        let group = ServiceGroup(services: [first, second, Conductor(holds: holds)],
                                 gracefulShutdownSignals: [.sigterm])
        try ThreadRunLoop.main.run(group)
        report("first", first, firstPort)
        report("second", second, secondPort)

    case "timeout":
        let service = ResidentThreadService(name: "svc-stuck", drainTimeout: .milliseconds(200))
        let counting = try CountingPort(on: service, sending: 5, handled: false)
        try counting.send()
        let group = ServiceGroup(services: [service, Conductor(holds: [])],
                                 gracefulShutdownSignals: [.sigterm])
        try ThreadRunLoop.main.run(group)
        report("stuck", service, counting)

    case "wrong-thread":
        let group = ServiceGroup(services: [Conductor(holds: [])], gracefulShutdownSignals: [.sigterm])
        let elsewhere = ResidentThread(name: "elsewhere")
        try elsewhere.perform(waitUntilDone: true) { try? ThreadRunLoop.main.run(group) }

    case "run-twice":
        let service = ResidentThreadService(name: "svc-twice")
        try ThreadRunLoop.main.run(ServiceGroup(services: [service, service]))

    default:
        say("usage: ServiceHost drain|timeout|wrong-thread|run-twice")
        exit(2)
    }
    say("exit: clean")
} catch {
    say("error: \(error)")
    exit(1)
}
#else
fatalError("built without the ServiceLifecycle trait: build with --enable-all-traits")
#endif

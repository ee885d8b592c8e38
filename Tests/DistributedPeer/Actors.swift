// The distributed actors of the tests' two processes. They live in this module, which the test
// target imports too, because a call names its target by the mangled name of the function, and
// that names the module: both sides must have the same types.

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Distributed
import RunLoopKit
import RunLoopKitDistributed
import Synchronization

/// A `Codable` error: it arrives as itself.
public struct StoreError: Error, Codable, Equatable {
    public var missingKey: String
    public init(missingKey: String) { self.missingKey = missingKey }
}

/// An error that is not `Codable`: it arrives as `.remoteCallFailed` with this description.
public struct PlainError: Error, CustomStringConvertible {
    public var text: String
    public init(text: String) { self.text = text }
    public var description: String { "plain error: \(text)" }
}

/// `PortActorSystem.caller` as the callee saw it.
public struct CallerInfo: Codable, Equatable, Sendable {
    public var pid: Int32
    public var uid: UInt32
    public var gid: UInt32
    public init(_ sender: MessagePort.Sender) {
        pid = sender.pid
        uid = sender.uid
        gid = sender.gid
    }
}

/// A key-value store on the cooperative pool (a default actor).
public distributed actor Store {
    public typealias ActorSystem = PortActorSystem
    private var values: [String: String] = [:]
    private var log: [Int] = []

    public init(actorSystem: PortActorSystem) {
        self.actorSystem = actorSystem
    }

    public distributed func put(_ key: String, _ value: String) {
        values[key] = value
    }

    public distributed func get(_ key: String) -> String? {
        values[key]
    }

    /// Throws `StoreError` for a key that is not there.
    public distributed func fetch(_ key: String) throws -> String {
        guard let value = values[key] else { throw StoreError(missingKey: key) }
        return value
    }

    /// Always throws `PlainError(text:)`.
    public distributed func failPlainly(_ text: String) throws {
        throw PlainError(text: text)
    }

    public distributed func twice(_ value: Int) -> Int {
        value * 2
    }

    /// Any `Codable` value back: a generic target, called with a substitution.
    public distributed func echo<Value: Codable & Sendable>(_ value: Value) -> Value {
        value
    }

    /// Appends after a suspension, so that a call that overtook another would land first.
    public distributed func append(_ entry: Int) async {
        await Task.yield()
        log.append(entry)
    }

    public distributed func entries() -> [Int] {
        log
    }

    public distributed func caller() -> CallerInfo? {
        PortActorSystem.caller.map(CallerInfo.init)
    }

    /// The name of the thread the call runs on.
    public distributed func threadName() -> String {
        currentThreadName()
    }

    /// Never answers (until the process ends).
    public distributed func hang() async throws {
        try await Task.sleep(for: .seconds(3_600))
    }

    /// Kills its own process in the middle of the call.
    public distributed func die() -> Int {
        kill(getpid(), SIGKILL)
        return 0
    }
}

/// An actor pinned to a resident thread: its calls run there. The thread is a
/// static one: a distributed actor's stored properties cannot be read from nonisolated code such
/// as `unownedExecutor` (Swift 6.3: "distributed actor-isolated property … can not be accessed
/// from a nonisolated context").
public distributed actor PinnedStore {
    public typealias ActorSystem = PortActorSystem
    public static let thread = ResidentThread(name: "pinned-store")
    private var log: [Int] = []

    public init(actorSystem: PortActorSystem) {
        self.actorSystem = actorSystem
    }

    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        Self.thread.executor.asUnownedSerialExecutor()
    }

    public distributed func append(_ entry: Int) async {
        await Task.yield()
        log.append(entry)
    }

    public distributed func entries() -> [Int] {
        log
    }

    /// The thread's name, and whether the thread's loop executor says it runs this code.
    public distributed func whereAmI() -> [String] {
        [currentThreadName(), Self.thread.executor.isIsolatingCurrentContext() == true ? "isolated" : "not isolated"]
    }
}

/// What a `Gate` and its `Opener` share: a semaphore, and whether the gate is blocked on it.
public final class GateLatch: Sendable {
    let semaphore = DispatchSemaphore(value: 0)
    let waiting = Atomic<Bool>(false)

    public init() {}
}

/// A default actor whose `waitBlocking` blocks its thread until an `Opener` signals: if calls
/// ran on the system's own thread, no call could reach the peer while it blocks.
public distributed actor Gate {
    public typealias ActorSystem = PortActorSystem
    private let latch: GateLatch

    public init(actorSystem: PortActorSystem, latch: GateLatch) {
        self.actorSystem = actorSystem
        self.latch = latch
    }

    /// Blocks the calling thread until the opener signals (or 60 s pass). True when it did.
    public distributed func waitBlocking() -> Bool {
        latch.waiting.store(true, ordering: .sequentiallyConsistent)
        return latch.semaphore.wait(timeout: .now() + 60) == .success
    }
}

/// Another default actor, which sees whether the gate blocks and opens it.
public distributed actor Opener {
    public typealias ActorSystem = PortActorSystem
    private let latch: GateLatch

    public init(actorSystem: PortActorSystem, latch: GateLatch) {
        self.actorSystem = actorSystem
        self.latch = latch
    }

    public distributed func isGateWaiting() -> Bool {
        latch.waiting.load(ordering: .sequentiallyConsistent)
    }

    public distributed func open() {
        latch.semaphore.signal()
    }
}

/// Remote control of the peer's own system.
public distributed actor Control {
    public typealias ActorSystem = PortActorSystem

    public init(actorSystem: PortActorSystem) {
        self.actorSystem = actorSystem
    }

    public distributed func unpublish(_ name: String) {
        actorSystem.unpublish(name)
    }

    public distributed func pid() -> Int32 {
        getpid()
    }
}

/// A protocol a client can call knowing nothing else (`$Greeter.resolve(id:using:)`). The
/// tests implement it; the peer only calls it.
@Resolvable
public protocol Greeter: DistributedActor where ActorSystem == PortActorSystem {
    distributed func greet(_ name: String) -> String
}

/// Another protocol, which the tests' greeter does not conform to: a call of it must be refused.
@Resolvable
public protocol Counter: DistributedActor where ActorSystem == PortActorSystem {
    distributed func increment() -> Int
}

/// The calling thread's name, as the kernel shows it (/proc/thread-self/comm).
public func currentThreadName() -> String {
    let file = open("/proc/thread-self/comm", O_RDONLY | O_CLOEXEC)
    guard file >= 0 else { return "?" }
    defer { close(file) }
    var bytes = [UInt8](repeating: 0, count: 64)
    let count = read(file, &bytes, bytes.count)
    return String(decoding: bytes[0..<max(count, 0)], as: UTF8.self).trimmingSuffix("\n")
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Distributed
import FoundationEssentials
import RunLoopKit
import Synchronization

/// A distributed actor system for the processes of one host, over named ports: an
/// actor `publish`ed under a name is callable from any process its access policy admits, with
/// typed arguments, results and errors, and the caller's kernel-verified identity
/// (`PortActorSystem.caller`) inside the call.
///
/// ```swift
/// distributed actor Store {
///     typealias ActorSystem = PortActorSystem
///     distributed func get(_ key: String) -> String? { … }
/// }
/// // The daemon:
/// let system = PortActorSystem()
/// try system.publish(Store(actorSystem: system), as: "store")
/// // A client, in another process:
/// let store = try Store.resolve(id: .named("store"), using: PortActorSystem())
/// let value = try await store.get("k")
/// ```
///
/// A call is a CALL envelope (Protocols/distributed-envelope.md) sent over a session with the
/// callee's system, answered by a RETURN, THROW or FAILURE on a reply port of the caller's: one
/// frame each way on sockets made once per session, no descriptor per call. The first call to a
/// name connects to it (`MessagePort.connect(to:)`: `.accessDenied` when its policy refuses this
/// process, `.actorNotFound` when nothing is published under it) and opens the session.
///
/// Where calls run: on the actor's own executor. A default actor runs on the cooperative pool; an
/// actor pinned to a resident thread (`unownedExecutor` is `thread.executor`) runs on that thread,
/// whose loop then also receives the calls, so a call reaches the actor with no hand-off. The
/// system's own thread ("PortActorSystem") receives the replies, watches the sessions and the
/// published ports of default actors, and times the calls out.
public final class PortActorSystem: DistributedActorSystem, Sendable {
    public typealias ActorID = PortActorID
    public typealias SerializationRequirement = Codable
    public typealias InvocationEncoder = PortInvocationEncoder
    public typealias InvocationDecoder = PortInvocationDecoder
    public typealias ResultHandler = PortResultHandler

    struct State {
        var isShutDown = false
        var lastSerial: UInt64 = 0
        /// Every live local actor of this system, for `resolve`.
        var localActors: [PortActorID: LocalActor] = [:]
        var publications: [String: Publication] = [:]
        var sessions: [SessionKey: ClientSession] = [:]
    }

    let thread: ResidentThread
    let calls: PendingCalls
    let coding: ValueCoding
    let state = Locked(State())
    /// `callTimeout` in nanoseconds: read by every call, so without a lock.
    private let timeoutNanoseconds = Atomic<Int64>(30_000_000_000)

    /// The loop of the system's thread.
    var loop: ThreadRunLoop { thread.runLoop }

    /// A system with its own resident thread, named "PortActorSystem". Any thread; a thread start.
    public init() {
        thread = ResidentThread(name: "PortActorSystem")
        calls = PendingCalls(loop: thread.runLoop)
        coding = ValueCoding()
    }

    deinit {
        thread.stop()
    }

    // MARK: - Settings and identity

    @TaskLocal static var currentCaller: MessagePort.Sender?

    /// Inside a distributed function called from another process: that process, as the kernel
    /// reported it with the call's frame (pid, uid, gid; never what the peer says). Nil outside a
    /// call, and in a call from this process (direct, or through a port). Any task; a task-local read.
    public static var caller: MessagePort.Sender? { currentCaller }

    /// How long a remote call waits for its reply before it fails with `.callTimedOut` (the
    /// first call to a name includes connecting to it). Default 30 s. Any thread; an atomic.
    public var callTimeout: Duration {
        get { .nanoseconds(timeoutNanoseconds.load(ordering: .relaxed)) }
        set {
            let (seconds, attoseconds) = newValue.components
            let nanoseconds = seconds.multipliedReportingOverflow(by: 1_000_000_000)
            timeoutNanoseconds.store(nanoseconds.overflow ? .max : nanoseconds.partialValue &+ attoseconds / 1_000_000_000,
                                     ordering: .relaxed)
        }
    }

    // MARK: - DistributedActorSystem

    /// The local actor `id` names, if this system has it (also by the name it is published
    /// under, so a call from this process is direct: no port); nil for an actor of another
    /// process, which the runtime then calls through `remoteCall`. Throws `.actorNotFound` for
    /// an identity another system assigned (it is not reachable by name). Any thread; a lock.
    public func resolve<Act>(id: PortActorID, as actorType: Act.Type) throws -> Act?
        where Act: DistributedActor, Act.ID == PortActorID {
        let local: (any DistributedActor)? = state.withLock { state in
            if let actor = state.localActors[id]?.actor { return actor }
            if case .named(let name, let publisher) = id.kind, publisher == nil || publisher == geteuid() {
                return state.publications[name]?.actor
            }
            return nil
        }
        if let actor = local as? Act { return actor }
        if case .assigned = id.kind { throw PortActorSystemError.actorNotFound(id.description) }
        return nil
    }

    /// A new identity for a local actor of this system. Any thread; a lock.
    public func assignID<Act>(_ actorType: Act.Type) -> PortActorID
        where Act: DistributedActor, Act.ID == PortActorID {
        let serial = state.withLock { state in
            state.lastSerial += 1
            return state.lastSerial
        }
        return PortActorID(kind: .assigned(process: Self.processID, serial: serial))
    }

    /// Records a local actor, for `resolve`. Any thread; a lock.
    public func actorReady<Act>(_ actor: Act) where Act: DistributedActor, Act.ID == PortActorID {
        state.withLock { $0.localActors[actor.id] = LocalActor(actor) }
    }

    /// Forgets an actor that was deinitialized. Any thread; a lock.
    public func resignID(_ id: PortActorID) {
        _ = state.withLock { $0.localActors.removeValue(forKey: id) }
    }

    /// An encoder for one call. Any thread; free.
    public func makeInvocationEncoder() -> PortInvocationEncoder {
        PortInvocationEncoder(coding: coding)
    }

    /// Sends the call to the actor's process and returns its result, or throws its error (a
    /// `Codable` error as it was thrown, any other as `.remoteCallFailed`) or the reason the call
    /// failed: `PortActorSystemError`, `PortError.accessDenied`. The calling task; it suspends
    /// (no thread blocks) until the reply.
    public func remoteCall<Act, Err, Res>(on actor: Act, target: RemoteCallTarget, invocation: inout PortInvocationEncoder,
                                          throwing: Err.Type, returning: Res.Type) async throws -> Res
        where Act: DistributedActor, Act.ID == PortActorID, Err: Error, Res: Codable {
        // A client span named after the target, when a tracer is installed (RunLoopKitTracing).
        try await MessageContext.withSpan(named: target.description, isClient: true) {
            let reply = try await exchange(&invocation, target: target, with: actor.id)
            return try result(of: reply, as: Res.self, target: target)
        }
    }

    /// `remoteCall` for a function that returns nothing. The calling task.
    public func remoteCallVoid<Act, Err>(on actor: Act, target: RemoteCallTarget, invocation: inout PortInvocationEncoder,
                                         throwing: Err.Type) async throws
        where Act: DistributedActor, Act.ID == PortActorID, Err: Error {
        try await MessageContext.withSpan(named: target.description, isClient: true) {
            let reply = try await exchange(&invocation, target: target, with: actor.id)
            try checkVoidResult(of: reply, target: target)
        }
    }

    /// Hands a target's result to its handler (the runtime's call, on the executing task).
    public func invokeHandlerOnReturn(handler: PortResultHandler, resultBuffer: UnsafeRawPointer,
                                      metatype: Any.Type) async throws {
        guard let type = metatype as? any Codable.Type else {
            return try await handler.onThrow(error: CallDecodingFailure("the result type \(metatype) is not Codable"))
        }
        // A copy: the runtime destroys the buffer's value after this returns (Swift 6.3's
        // executeDistributedTarget deinitializes it; a value moved out was destroyed twice).
        func hand<Value: Codable>(_: Value.Type) async throws {
            try await handler.onReturn(value: resultBuffer.assumingMemoryBound(to: Value.self).pointee)
        }
        try await hand(type)
    }

    /// This process's id, for assigned identities.
    private static let processID = getpid()
}

/// A weak reference to a local actor, for `resolve`.
struct LocalActor: @unchecked Sendable {
    weak var actor: (any DistributedActor)?

    init(_ actor: any DistributedActor) {
        self.actor = actor
    }
}

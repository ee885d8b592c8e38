/// Why a distributed call through a `PortActorSystem` failed, when the callee did not throw the
/// error itself. Errors of the port layer underneath come as `PortError` (`.accessDenied` when the
/// publisher's policy refuses this process, `.invalidName`, `.messageTooLarge`, `.invalidPort`
/// once the system was shut down).
public enum PortActorSystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No actor is published under the name (the associated value is the identity called), or
    /// the identity was assigned by another system and is not reachable by name.
    case actorNotFound(String)
    /// No reply came within the system's `callTimeout`. The call may still run in the callee.
    case callTimedOut
    /// The callee's process died, or its session ended (the actor was unpublished, or the
    /// callee's system shut down), while the call waited for its reply.
    case peerTerminated
    /// The callee threw an error that is not `Codable` (its description), could not decode the
    /// call (its arguments, or a type it names), or sent a reply this side cannot read.
    case remoteCallFailed(String)
    /// The published actor has no such distributed function (or it belongs to another type):
    /// the callee was built from other source. The associated value names the function.
    case unknownTarget(String)

    /// What went wrong, in words, for logs. Any thread; allocates the string.
    public var description: String {
        switch self {
        case .actorNotFound(let id): "no actor is published as \(id)"
        case .callTimedOut: "no reply within the call timeout"
        case .peerTerminated: "the callee's process or session ended before it replied"
        case .remoteCallFailed(let reason): "the remote call failed: \(reason)"
        case .unknownTarget(let target): "the callee has no distributed function \(target)"
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Why a port operation failed. Runtime conditions, never programmer mistakes: the message
/// that could not be sent is not lost silently — `send` throws and the caller still holds it.
public enum PortError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The port was invalidated before or while the message was being sent.
    case invalidPort
    /// The queue stayed full until the deadline.
    case timedOut
    /// The task sending or receiving was cancelled; nothing was queued.
    case cancelled
    /// The message is larger than the transport allows.
    case messageTooLarge(limit: Int)
    /// The kernel refused a resource (EMFILE/ENFILE/ENOMEM when creating the port's eventfd).
    case resourceExhausted(errno: Int32)
    /// A peer process sent a frame that violates Protocols/port-message-frame.md; its
    /// connection was dropped and every descriptor that came with the frame closed.
    case malformedFrame(FrameError)
    /// The descriptor given as a send right is not an AF_UNIX SOCK_SEQPACKET socket.
    case notASendRight

    public var description: String {
        switch self {
        case .invalidPort: "the port is invalid"
        case .timedOut: "the port's queue stayed full until the deadline"
        case .cancelled: "the task was cancelled before the message could be queued"
        case .messageTooLarge(let limit): "the message exceeds the limit of \(limit) bytes"
        case .resourceExhausted(let code): "resource exhausted: \(String(cString: strerror(code))) (errno \(code))"
        case .malformedFrame(let reason): "malformed frame from a peer process: \(reason.rawValue)"
        case .notASendRight: "the descriptor is not a port send right (an AF_UNIX SOCK_SEQPACKET socket)"
        }
    }
}

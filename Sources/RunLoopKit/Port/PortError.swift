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
    /// The task sending, receiving or waiting for a reply was cancelled; nothing was queued.
    case cancelled
    /// The task waiting for a reply (async `sendRequest`) was cancelled after its request was
    /// queued: the destination may handle the request, or have handled it. Retrying is safe only
    /// for an idempotent request.
    case requestCancelled
    /// The message is larger than the transport allows.
    case messageTooLarge(limit: Int)
    /// The kernel refused a resource (EMFILE/ENFILE/ENOMEM when creating the port's eventfd).
    case resourceExhausted(errno: Int32)
    /// A peer process sent a frame that violates Protocols/port-message-frame.md; its
    /// connection was dropped and every descriptor that came with the frame closed.
    case malformedFrame(FrameError)
    /// The descriptor given as a send right is not an AF_UNIX SOCK_SEQPACKET socket.
    case notASendRight
    /// `publish(as:)`: a live port (in this or another process) holds the name.
    case nameInUse(String)
    /// `connect(to:)`: no port is published under the name in the caller's scope or the system's.
    case nameNotFound(String)
    /// The name is not 1–100 bytes of `[A-Za-z0-9._-]`.
    case invalidName(String)
    /// The port's access policy refuses this process (`connect`), or refused a frame's sender
    /// (reported through the transport error handler; the connection was dropped).
    case accessDenied
    /// `sendRequest`: the request was queued but no reply came within the timeout.
    case replyTimedOut
    /// A named-port handshake broke Protocols/named-ports.md (the owner dropped the connection).
    case handshakeFailed(HandshakeError)
    /// A port component (or reply port) that this destination's transport cannot carry: a
    /// port on another host takes Data components and reply ports only, and a remote proxy
    /// cannot be handed to another process as a send right.
    case notTransferable
    /// `PinnedProcess(pid:)`: no process has this pid (it has exited and been reaped, or never
    /// existed), or it cannot be pinned (a thread that is not a process, a kernel before 5.3);
    /// `PinnedProcess.sendSignal`: the process has been reaped.
    case processNotFound(Int32)
    /// The destination does not take port components (`acceptsPortComponents == false`): an
    /// in-process `send` with a port component, or a frame with descriptors that the owner's
    /// kernel refused (Linux 6.16+) or the owner dropped (reported through its transport error
    /// handler). Nothing of the message was delivered.
    case portsRefused
    /// `connect(to:)`: this process's user holds as many open connections to the name as its
    /// owner allows one user (`NameLimits.connectionsPerUser`); closing one admits the next.
    case tooManyConnections
    /// A frame or handshake whose credentials name a process that did not send it: a HELLO
    /// naming another process than the one that connected, a frame claiming this process over a
    /// connection another process made that this process did not send (§3.32, §3.60), or a frame
    /// from a process other than the connector that lives in a pid namespace below the owner's,
    /// where a user namespace made without privilege could name it (§3.61). Only CAP_SYS_ADMIN
    /// over a pid namespace lets a process claim another's pid. The owner refused it and dropped
    /// the connection (reported through its transport error handler).
    case forgedCredentials
    /// `connect(to:publishedBy:timeout:)`: the owner of the name did not answer the handshake
    /// before the timeout (its loop is not running, is stuck, or does not read its name), or
    /// its backlog stayed full. Nothing was connected.
    case handshakeTimedOut

    /// What went wrong, in words, for logs. Any thread; allocates the string.
    public var description: String {
        switch self {
        case .invalidPort: "the port is invalid"
        case .timedOut: "the port's queue stayed full until the deadline"
        case .cancelled: "the task was cancelled before the message could be queued"
        case .requestCancelled:
            "the task was cancelled after its request was queued: the destination may handle it (retry only an idempotent request)"
        case .messageTooLarge(let limit): "the message exceeds the limit of \(limit) bytes"
        case .resourceExhausted(let code): "resource exhausted: \(String(cString: strerror(code))) (errno \(code))"
        case .malformedFrame(let reason): "malformed frame from a peer process: \(reason.rawValue)"
        case .notASendRight: "the descriptor is not a port send right (an AF_UNIX SOCK_SEQPACKET socket)"
        case .nameInUse(let name): "the port name '\(name)' is held by a live port"
        case .nameNotFound(let name): "no port is published as '\(name)'"
        case .invalidName(let name): "'\(name)' is not a port name (1–100 bytes of A-Z a-z 0-9 . _ -)"
        case .accessDenied: "the port's access policy refuses this process"
        case .replyTimedOut: "no reply arrived within the request's timeout"
        case .handshakeFailed(let reason): "named-port handshake failed: \(reason.rawValue)"
        case .notTransferable: "a port in this message cannot travel over the destination's transport"
        case .processNotFound(let pid): "no process \(pid) to pin (it has exited and been reaped, or never existed)"
        case .portsRefused: "the destination port does not take port components (descriptors)"
        case .tooManyConnections: "this user holds as many connections to the name as its owner allows one user"
        case .forgedCredentials: "a peer's credentials named a process other than the one that sent them (forged with CAP_SYS_ADMIN, or from a user namespace it made)"
        case .handshakeTimedOut: "the owner of the name did not answer the handshake in time"
        }
    }
}

#if GRPC
/// Why `PortBridgeClient.connect(to:)` could not reach a remote port. Nothing was delivered.
public enum RemoteConnectError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The server exports no port under the name.
    case nameNotFound(String)
    /// The name's access policy refuses this client's certificate (or its lack of one).
    case accessDenied
    /// The name is not 1–100 bytes of `[A-Za-z0-9._-]`.
    case invalidName(String)
    /// No stream could be opened: the server is unreachable, refused the TLS handshake (no
    /// valid client certificate), or failed; gRPC's status message says which.
    case unavailable(String)
    /// This process is out of descriptors for the proxy's queue.
    case resourceExhausted(errno: Int32)
    /// The task calling `connect` was cancelled.
    case cancelled

    public var description: String {
        switch self {
        case .nameNotFound(let name): "no port is exported as '\(name)'"
        case .accessDenied: "the exported name's access policy refuses this client"
        case .invalidName(let name): "'\(name)' is not a port name (1–100 bytes of A-Z a-z 0-9 . _ -)"
        case .unavailable(let reason): "the bridge is unavailable: \(reason)"
        case .resourceExhausted(let code): "resource exhausted (errno \(code))"
        case .cancelled: "the connecting task was cancelled"
        }
    }
}
#endif

#if GRPC
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import ServiceLifecycle

/// A gRPC server that serves a `PortExporter` (and any services of your own) on one address,
/// as a swift-service-lifecycle `Service`: run it in a `ServiceGroup` beside your other
/// services, or await `run()` in a task. Export ports on `exporter` before or while it runs.
public final class PortBridgeServer: Service, Sendable {
    /// The ports this server exports.
    public let exporter: PortExporter
    private let server: GRPCServer<HTTP2ServerTransport.Posix>

    /// A server listening on `host`:`port` (0: a port the system picks; see `listeningPort`).
    /// `keepalive` pings each client connection after it has been quiet for the interval, and
    /// closes a connection that has sent nothing for the interval plus the timeout (a silent
    /// client: its streams end, its descriptor is released), and sets how often clients may
    /// ping it; nil leaves gRPC's defaults
    /// (a ping after two idle hours, client pings at most every five minutes — bridge clients
    /// with keepalive on would be sent away). Throws
    /// `.plaintextOffLoopback` for plaintext on a host that is not loopback, unless allowed.
    /// Writes are flushed at once (the transport's flush coalescing, which holds a flush up to
    /// 100 µs for more writes to join it, is off: each stream's writer already sends the frames
    /// queued when it wakes in one write). Any thread; nothing listens until `run()`.
    public init(host: String, port: Int, security: BridgeSecurity, exporter: PortExporter = PortExporter(),
                services: [any RegistrableRPCService] = [],
                keepalive: BridgeKeepalive? = nil) throws(BridgeConfigurationError) {
        try security.check(host: host)
        self.exporter = exporter
        var config = HTTP2ServerTransport.Posix.Config.defaults
        config.rpc.maxRequestPayloadSize = BridgeFrame.maximumFrameSize
        if let keepalive {
            config.connection.keepalive = keepalive.server
            config.channelDebuggingCallbacks.onAcceptTCPConnection = SilentClientCloser.install(keepalive)
        }
        config.connection.flushCoalescing = nil
        let transport = HTTP2ServerTransport.Posix(
            address: .ipv4(host: host, port: port), transportSecurity: security.serverSecurity, config: config)
        server = GRPCServer(transport: transport, services: [exporter] + services)
    }

    /// The port the server listens on, once it does. Any task; waits for the listener.
    /// Throws when the server could not listen or has stopped.
    public var listeningPort: Int {
        get async throws {
            guard let address = try await server.listeningAddress?.ipv4 else {
                throw RPCError(code: .unavailable, message: "the bridge server is not listening")
            }
            return address.port
        }
    }

    /// Serves until `shutDown()` or a graceful shutdown of the service group. Any task.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await server.serve()
        } onGracefulShutdown: {
            self.server.beginGracefulShutdown()
        }
    }

    /// Stops accepting streams; `run()` returns once the open ones have ended. Any thread.
    public func shutDown() { server.beginGracefulShutdown() }
}
#endif

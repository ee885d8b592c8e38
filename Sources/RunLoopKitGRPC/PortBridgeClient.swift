#if GRPC
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import ServiceLifecycle
import Synchronization

/// The client side of the bridge: proxies for ports that another host exports. Run it (as a
/// swift-service-lifecycle `Service`, or by awaiting `run()` in a task of your own) for as long
/// as its proxies are used; `connect(to:)` gives a proxy `MessagePort` for a remote name.
///
/// A remote proxy behaves as a local proxy does: `send` blocks (and `send … async` suspends)
/// while its stream's queue of `queueLimit` frames is full — gRPC's flow control keeps it full
/// while the server does not read — and fails with `.timedOut` at its deadline; a message
/// whose `send` returned is delivered. A reply port
/// in `from:` is numbered on the stream, and replies to it arrive on it here. Data components
/// only: any other port component throws `.notTransferable`. The stream's end — the server
/// gone, the connection dropped — invalidates the proxy: its invalidation handler runs,
/// blocked senders get `.invalidPort`, pending requests fail at once. So does a server that
/// falls silent without closing anything (a partition, a stopped process), when keepalive
/// pings are on (`BridgeKeepalive.default` notices it within 1.5 s). So does the server
/// invalidating or unexporting the port. Reconnecting is a new `connect`.
public final class PortBridgeClient: Service, Sendable {
    private let client: GRPCClient<HTTP2ClientTransport.Posix>
    /// The size of the proxies' frame queues when `connect` is not told otherwise.
    public let defaultQueueLimit: Int

    /// A client for the bridge at `host`:`port`. `keepalive` pings the server while proxies
    /// are open, so that a server gone silent (partitioned, stopped, hung) invalidates them
    /// (within 1.5 s with `BridgeKeepalive.default`), as a server that died does; nil, the
    /// default, leaves gRPC's own
    /// (no pings: a silent server is noticed only by the TCP stack, after minutes, or by each
    /// request's own timeout). Throws `.plaintextOffLoopback` for plaintext to a host that is
    /// not loopback (unless allowed). Writes are flushed at once, as the server's are. Any
    /// thread; no connection is made until `run()` and the first `connect`.
    public init(host: String, port: Int, security: BridgeSecurity, defaultQueueLimit: Int = 64,
                keepalive: BridgeKeepalive? = nil) throws {
        try security.check(host: host)
        precondition(defaultQueueLimit > 0, "PortBridgeClient defaultQueueLimit must be at least 1 (got \(defaultQueueLimit))")
        self.defaultQueueLimit = defaultQueueLimit
        var config = HTTP2ClientTransport.Posix.Config.defaults
        config.http2.maxFrameSize = 1 << 20
        config.connection.keepalive = keepalive?.client
        // A flush waits for nothing: see PortBridgeServer.init.
        config.connection.flushCoalescing = nil
        let transport = try HTTP2ClientTransport.Posix(
            target: .dns(host: host, port: port), transportSecurity: security.clientSecurity, config: config)
        client = GRPCClient(transport: transport)
    }

    /// Runs the client's connections until `shutDown()` or a graceful shutdown of the service
    /// group. Any task; returns when the last stream has ended.
    public func run() async throws {
        try await withGracefulShutdownHandler {
            try await client.runConnections()
        } onGracefulShutdown: {
            self.client.beginGracefulShutdown()
        }
    }

    /// Stops opening streams; `run()` returns once the open ones have ended. Any thread.
    public func shutDown() { client.beginGracefulShutdown() }

    /// A proxy for the port the server exports as `name`, once the server has admitted this
    /// client. Any task; one stream and one eventfd per proxy. Throws `RemoteConnectError`.
    public func connect(to name: String, queueLimit: Int? = nil) async throws(RemoteConnectError) -> MessagePort {
        guard (1...100).contains(name.utf8.count), name.utf8.allSatisfy(BridgeFrame.isNameByte) else {
            throw .invalidName(name)
        }
        let outbox: FrameOutbox
        do { outbox = try FrameOutbox(limit: queueLimit ?? defaultQueueLimit) } catch {
            if case .resourceExhausted(let code) = error { throw .resourceExhausted(errno: code) }
            throw .unavailable("\(error)")
        }
        let routes = ReplyRoutes()
        let proxy = MessagePort(conduit: RemotePortConduit(outbox: outbox, routes: routes))
        let opening = Opening()
        let open = try? BridgeFrame.open(name: name).encoded()
        let stream = Task { [weak proxy, client] in
            do {
                try await client.bidirectionalStreaming(
                    request: StreamingClientRequest(of: EncodedFrame.self) { writer in
                        try await writer.write(EncodedFrame(bytes: Data(open ?? [])))
                        try await outbox.drain { try await writer.write(contentsOf: $0) }
                    },
                    descriptor: BridgeMethod.descriptor,
                    serializer: EncodedFrameSerializer(),
                    deserializer: BridgeFrameDeserializer(),
                    options: .defaults
                ) { response in
                    for try await frame in response.messages {
                        switch frame {
                        case .accept:
                            opening.finish(nil)
                        case .reply(let msgid, let replyID, let data):
                            // A reply port that is gone, or refuses, loses the reply, as a local
                            // one would.
                            try? await routes.port(for: replyID)?.send(msgid: msgid, components: data.map { .data($0) })
                        case .open, .message:
                            throw RPCError(code: .internalError, message: "the server sent a client's frame")
                        }
                    }
                }
                opening.finish(.unavailable("the server ended the stream"))
            } catch let error as RPCError {
                opening.finish(Self.connectError(error, name: name))
            } catch {
                opening.finish(.unavailable("\(error)"))
            }
            outbox.close()
            proxy?.invalidate()
        }
        let outcome = await withTaskCancellationHandler {
            await opening.wait()
        } onCancel: {
            opening.finish(.cancelled)
        }
        if let outcome {
            outbox.close()
            stream.cancel()
            throw outcome
        }
        return proxy
    }

    private static func connectError(_ error: RPCError, name: String) -> RemoteConnectError {
        switch error.code {
        case .notFound: .nameNotFound(name)
        case .permissionDenied: .accessDenied
        default: .unavailable("\(error.code): \(error.message)")
        }
    }
}

/// The outcome of a stream's opening, awaited by `connect`: nil once admitted, else the error.
private final class Opening: Sendable {
    private struct State {
        var outcome: RemoteConnectError??
        var waiter: CheckedContinuation<RemoteConnectError?, Never>?
    }
    private let state = Mutex(State())

    /// Records the first outcome and resumes the waiter; later ones are ignored.
    func finish(_ outcome: RemoteConnectError?) {
        let waiter: CheckedContinuation<RemoteConnectError?, Never>? = state.withLock { state in
            guard state.outcome == nil else { return nil }
            state.outcome = .some(outcome)
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: outcome)
    }

    func wait() async -> RemoteConnectError? {
        await withCheckedContinuation { continuation in
            let known: RemoteConnectError?? = state.withLock { state in
                if state.outcome == nil { state.waiter = continuation }
                return state.outcome
            }
            if let known { continuation.resume(returning: known) }
        }
    }
}
#endif

#if GRPC
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import Synchronization

/// The serving side of the bridge: local ports exported under names to remote clients, as a
/// gRPC service. Add it to a `GRPCServer`'s services (or let `PortBridgeServer` run one).
///
/// Each remote `connect` is one bidirectional stream: its MESSAGE frames are queued on the
/// exported port (suspending — and so, through HTTP/2 flow control, stopping the client — while
/// the port's queue is full), each with the client's verified identity (`remotePeer`) and, when
/// it asked for one, a reply port that sends REPLY frames back on the same stream. A stream
/// lasts as long as its export: invalidating the exported port, or `unexport`ing its name, ends
/// every stream of it at once with gRPC status `unavailable`, and so invalidates the remote
/// proxies.
public final class PortExporter: RegistrableRPCService, Sendable {
    struct Export: Sendable {
        let port: MessagePort
        let access: RemoteAccess
        /// The export's open streams, ended together.
        let streams: ExportStreams
        /// The port's invalidation watch that ends them.
        let watch: UInt64
    }

    private let exports = Mutex<[String: Export]>([:])
    /// How many REPLY frames a stream holds before reply senders wait.
    let replyLimit: Int

    /// An exporter whose streams each buffer up to `replyLimit` replies. Any thread; free.
    public init(replyLimit: Int = 64) {
        precondition(replyLimit > 0, "PortExporter replyLimit must be at least 1 (got \(replyLimit))")
        self.replyLimit = replyLimit
    }

    /// Makes `port` reachable by remote clients as `name`, for the clients `access` admits.
    /// Throws `.invalidName` (not 1–100 bytes of `[A-Za-z0-9._-]`), `.nameInUse` (exported
    /// already), `.invalidPort`. Exporting a proxy is a precondition failure. Invalidating the
    /// port ends each of its open streams at once (gRPC status `unavailable`): the remote
    /// proxies are invalidated, their blocked senders and pending requests fail with
    /// `.invalidPort`. Any thread; a lock, and the port's lock once to watch it.
    public func export(_ port: MessagePort, as name: String, access: RemoteAccess = .anyVerifiedClient) throws(PortError) {
        precondition(!port.isProxy, "PortExporter.export(_:as:) needs a local port; \(port) is a proxy")
        guard (1...100).contains(name.utf8.count), name.utf8.allSatisfy(BridgeFrame.isNameByte) else {
            throw .invalidName(name)
        }
        try exports.withLock { (exports) throws(PortError) in
            if let existing = exports[name], existing.port.isValid { throw .nameInUse(name) }
            let streams = ExportStreams()
            // Runs on the thread that invalidates the port: it only signals the streams' tasks.
            guard let watch = port.watchInvalidation({
                streams.endAll("the port exported as '\(name)' was invalidated")
            }) else { throw .invalidPort }
            exports[name] = Export(port: port, access: access, streams: streams, watch: watch)
        }
    }

    /// Stops exporting `name`, and ends the streams open to it at once (gRPC status
    /// `unavailable`), as invalidating its port would, leaving the port itself valid. Nothing
    /// if `name` is not exported. Any thread; a lock.
    public func unexport(_ name: String) {
        guard let export = exports.withLock({ $0.removeValue(forKey: name) }) else { return }
        export.port.stopWatchingInvalidation(export.watch)
        export.streams.endAll("'\(name)' is no longer exported")
    }

    /// Registers the bridge's RPC. Called by `GRPCServer`.
    public func registerMethods<Transport: ServerTransport>(with router: inout RPCRouter<Transport>) {
        router.registerHandler(forMethod: BridgeMethod.descriptor, deserializer: BridgeFrameDeserializer(),
                               serializer: EncodedFrameSerializer()) { request, context in
            let peer = RemotePeer(address: context.remotePeer,
                                  certificate: (context.transportSpecific as? HTTP2ServerTransport.Posix.Context)?.peerCertificate)
            return StreamingServerResponse { writer in
                try await self.serve(request.messages, peer: peer, writer: writer)
                return [:]
            }
        }
    }

    private func export(named name: String) -> Export? {
        exports.withLock { exports in
            guard let export = exports[name] else { return nil }
            return export.port.isValid ? export : nil
        }
    }

    /// One stream, until either side ends it or its export ends (the port invalidated, the
    /// name unexported): then at once, with `unavailable`, whatever the stream was waiting for.
    private func serve(_ frames: RPCAsyncSequence<BridgeFrame, any Error>, peer: RemotePeer,
                       writer: RPCWriter<EncodedFrame>) async throws {
        let end = StreamEnd()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await self.serveFrames(frames, peer: peer, writer: writer, end: end) }
            group.addTask {
                if let reason = await end.wait() { throw RPCError(code: .unavailable, message: reason) }
            }
            // The first to finish ends the stream: the other is cancelled (a cancelled stream
            // stops reading, writing and delivering; a cancelled wait returns nil).
            defer { group.cancelAll() }
            _ = try await group.next()
        }
    }

    /// The OPEN frame, then MESSAGE frames in and REPLY frames out until either side ends the
    /// stream or the task is cancelled.
    private func serveFrames(_ frames: RPCAsyncSequence<BridgeFrame, any Error>, peer: RemotePeer,
                             writer: RPCWriter<EncodedFrame>, end: StreamEnd) async throws {
        var iterator = frames.makeAsyncIterator()
        guard case .open(let name)? = try await iterator.next() else {
            throw RPCError(code: .invalidArgument, message: "a bridge stream must begin with OPEN")
        }
        guard let export = export(named: name) else {
            throw RPCError(code: .notFound, message: "no port is exported as '\(name)'")
        }
        guard export.access.admits(peer) else {
            throw RPCError(code: .permissionDenied, message: "'\(name)' does not admit \(peer)")
        }
        // Unexported or invalidated since it was looked up: as if it had not been found.
        guard export.streams.add(end) else {
            throw RPCError(code: .notFound, message: "no port is exported as '\(name)'")
        }
        defer { export.streams.remove(end) }
        let outbox: FrameOutbox
        do { outbox = try FrameOutbox(limit: replyLimit) } catch {
            throw RPCError(code: .resourceExhausted, message: "cannot serve '\(name)': \(error)")
        }
        defer { outbox.close() }
        try await writer.write(EncodedFrame(bytes: Data(try BridgeFrame.accept.encoded())))

        let origin = RemoteOrigin(peer: peer)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                try await outbox.drain { try await writer.write(contentsOf: $0) }
            }
            // Reading ends when the client half-closes, the stream fails, or the port dies.
            defer { outbox.close() }
            while let frame = try await iterator.next() {
                guard case .message(let msgid, let replyID, _, let data) = frame else {
                    throw RPCError(code: .invalidArgument, message: "only MESSAGE frames may follow OPEN")
                }
                var message = MessagePort.Message(
                    msgid: msgid, components: data.map { .data($0) },
                    replyPort: replyID == 0 ? nil : MessagePort(conduit: ReplyPortConduit(outbox: outbox, replyID: replyID)))
                message.origin = origin
                guard try await deliver(message, to: export.port) else {
                    throw RPCError(code: .unavailable, message: "the port exported as '\(name)' was invalidated")
                }
            }
            outbox.close()
            try await group.waitForAll()
        }
    }

    /// Queues `message`, suspending while the port is full. False once the port is invalid.
    /// Every message is queued, whatever time its sender gave: its `send` returned, and a
    /// message that was sent is delivered, as on one host.
    private func deliver(_ message: MessagePort.Message, to port: MessagePort) async throws -> Bool {
        do throws(PortError) {
            try await port.enqueue(message)
            return true
        } catch .cancelled {
            throw CancellationError()
        } catch {
            return false
        }
    }
}
#endif

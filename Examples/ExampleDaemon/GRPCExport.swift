#if GRPC
import RunLoopKit
import RunLoopKitGRPC

/// `--grpc HOST:PORT [--grpc-tls CERT KEY CA]`: the service port is exported over the gRPC
/// bridge as well, under the same name — plaintext (loopback only), or mutual TLS admitting
/// any client certificate signed by CA.
struct GRPCOptions: Sendable {
    var host: String
    var port: Int
    var tls: (certificate: String, key: String, authority: String)?

    /// Parses `HOST:PORT`; nil when it is not that.
    init?(address: String) {
        guard let colon = address.lastIndex(of: ":"), let port = Int(address[address.index(after: colon)...]) else { return nil }
        host = String(address[..<colon])
        self.port = port
    }

    var security: BridgeSecurity {
        guard let tls else { return .plaintext() }
        return .mutualTLS(certificateChain: [.file(path: tls.certificate, format: .pem)],
                          privateKey: .file(path: tls.key, format: .pem),
                          trustRoots: [.file(path: tls.authority, format: .pem)])
    }
}

/// The running bridge server.
final class GRPCExport: Sendable {
    private let server: PortBridgeServer
    private let task: Task<Void, any Error>

    /// Exports `service` as `name` and starts serving on a task of its own. Called on the
    /// main thread; the bridge's work runs on gRPC's threads.
    init(_ service: MessagePort, as name: String, options: GRPCOptions) throws {
        server = try PortBridgeServer(host: options.host, port: options.port, security: options.security)
        try server.exporter.export(service, as: name, access: options.tls == nil ? .anyone : .anyVerifiedClient)
        let server = server
        task = Task {
            do { try await server.run() } catch { log("gRPC bridge on \(options.host):\(options.port) stopped: \(error)") }
        }
    }

    /// Stops accepting streams (the open ones end with the service port). Any thread.
    func stop() {
        server.shutDown()
        task.cancel()
    }
}
#endif

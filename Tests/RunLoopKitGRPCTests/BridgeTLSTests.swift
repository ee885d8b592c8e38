#if GRPC
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import RunLoopKitGRPC
import Testing

@Suite("gRPC bridge: mutual TLS and access")
struct BridgeTLSTests {
    @Test("a verified client reaches the port; its certificate identity is on every message", .timeLimit(.minutes(1)))
    func verifiedClient() async throws {
        let authority = try TestAuthority(name: "RunLoopKit test CA")
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.tls",
                                              security: authority.security(for: try authority.issue("localhost")),
                                              access: .identities(["client-a"]))
        let client = try PortBridgeClient(host: "localhost", port: server.port,
                                          security: authority.security(for: try authority.issue("client-a")))
        let running = Task { try await client.run() }
        let proxy = try await client.connect(to: "svc.tls")
        let reply = try await proxy.sendRequest(msgid: 1, components: [.data(bytes("hi"))], timeout: .seconds(20))
        #expect(reply.data == bytes("hi"))
        let message = try #require(receiver.messages.first)
        #expect(message.remotePeer?.commonNames == ["client-a"])
        #expect(message.remotePeer?.dnsNames == ["localhost"])
        #expect(message.remotePeer?.certificate != nil)
        #expect(message.sender == nil)
        proxy.invalidate()
        client.shutDown()
        running.cancel()
        _ = try? await running.value
        await server.stop()
    }

    @Test("a certificate the policy refuses: .accessDenied from connect, nothing delivered", .timeLimit(.minutes(1)))
    func refusedIdentity() async throws {
        let authority = try TestAuthority(name: "RunLoopKit test CA")
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.tls",
                                              security: authority.security(for: try authority.issue("localhost")),
                                              access: .identities(["client-a"]))
        let client = try PortBridgeClient(host: "localhost", port: server.port,
                                          security: authority.security(for: try authority.issue("client-b")))
        let running = Task { try await client.run() }
        await #expect(throws: RemoteConnectError.accessDenied) { _ = try await client.connect(to: "svc.tls") }
        #expect(receiver.messages.isEmpty)
        client.shutDown()
        running.cancel()
        _ = try? await running.value
        await server.stop()
    }

    @Test("a certificate from another authority, or none: connect fails, nothing delivered", .timeLimit(.minutes(1)))
    func invalidCertificates() async throws {
        let authority = try TestAuthority(name: "RunLoopKit test CA")
        let stranger = try TestAuthority(name: "Someone else's CA")
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.tls",
                                              security: authority.security(for: try authority.issue("localhost")),
                                              access: .anyVerifiedClient)
        // Signed by another CA, trusting the right one.
        let forged = try stranger.issue("client-a")
        let client = try PortBridgeClient(
            host: "localhost", port: server.port,
            security: .mutualTLS(certificateChain: [.bytes(Array(forged.certificatePEM.utf8), format: .pem)],
                                 privateKey: .bytes(Array(forged.keyPEM.utf8), format: .pem),
                                 trustRoots: [.bytes(Array(authority.pem.utf8), format: .pem)]))
        let running = Task { try await client.run() }
        await #expect(throws: RemoteConnectError.self) { _ = try await client.connect(to: "svc.tls") }
        client.shutDown()
        running.cancel()
        _ = try? await running.value

        // TLS without a client certificate.
        let transport = try HTTP2ClientTransport.Posix(
            target: .dns(host: "localhost", port: server.port),
            transportSecurity: .tls { $0.trustRoots = .certificates([.bytes(Array(authority.pem.utf8), format: .pem)]) })
        let outcome = try await withGRPCClient(transport: transport) { raw in
            await RawStream.run(raw, frames: [RawStream.open("svc.tls"), RawStream.message(msgid: 1)])
        }
        #expect(outcome.code != nil)
        #expect(outcome.frames.isEmpty)

        // Plaintext to a TLS server.
        let plain = try LoopbackClient(port: server.port)
        await #expect(throws: RemoteConnectError.self) { _ = try await plain.client.connect(to: "svc.tls") }
        await plain.stop()

        #expect(receiver.messages.isEmpty)
        await server.stop()
    }
}
#endif

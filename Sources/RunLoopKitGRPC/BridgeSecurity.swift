#if GRPC
import GRPCNIOTransportHTTP2

/// How a bridge's connections are secured: mutual TLS, or plaintext when asked for by name.
public struct BridgeSecurity: Sendable {
    enum Mode: Sendable {
        case mutualTLS(chain: [TLSConfig.CertificateSource], key: TLSConfig.PrivateKeySource,
                       trustRoots: [TLSConfig.CertificateSource], verifyServerHostname: Bool)
        case plaintext(allowNonLoopback: Bool)
    }

    let mode: Mode

    /// Mutual TLS: this side offers `certificateChain` (leaf first) with `privateKey`, and
    /// accepts only peers whose certificates chain to `trustRoots`. A client also checks that
    /// the server's certificate names the host it connects to, unless `verifyServerHostname`
    /// is false. A server reads the client's identity from its verified certificate.
    public static func mutualTLS(certificateChain: [TLSConfig.CertificateSource], privateKey: TLSConfig.PrivateKeySource,
                                 trustRoots: [TLSConfig.CertificateSource],
                                 verifyServerHostname: Bool = true) -> BridgeSecurity {
        BridgeSecurity(mode: .mutualTLS(chain: certificateChain, key: privateKey, trustRoots: trustRoots,
                                        verifyServerHostname: verifyServerHostname))
    }

    /// No encryption and no peer identity. Only on a loopback address (127.0.0.0/8, ::1,
    /// localhost) unless `allowNonLoopback`: anything on the network could read and forge it.
    public static func plaintext(allowNonLoopback: Bool = false) -> BridgeSecurity {
        BridgeSecurity(mode: .plaintext(allowNonLoopback: allowNonLoopback))
    }

    /// Refuses plaintext off loopback unless overridden.
    func check(host: String) throws(BridgeConfigurationError) {
        if case .plaintext(false) = mode, !Self.isLoopback(host) { throw .plaintextOffLoopback(host) }
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }

    var serverSecurity: HTTP2ServerTransport.Posix.TransportSecurity {
        switch mode {
        case .plaintext:
            return .plaintext
        case .mutualTLS(let chain, let key, let roots, _):
            return .mTLS(certificateChain: chain, privateKey: key) { config in
                config.trustRoots = .certificates(roots)
                config.clientCertificateVerification = .noHostnameVerification
            }
        }
    }

    var clientSecurity: HTTP2ClientTransport.Posix.TransportSecurity {
        switch mode {
        case .plaintext:
            return .plaintext
        case .mutualTLS(let chain, let key, let roots, let verifyHostname):
            return .mTLS(certificateChain: chain, privateKey: key) { config in
                config.trustRoots = .certificates(roots)
                config.serverCertificateVerification = verifyHostname ? .fullVerification : .noHostnameVerification
            }
        }
    }
}

/// A bridge that cannot be set up as asked.
public enum BridgeConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Plaintext was asked for on an address that is not loopback, without `allowNonLoopback`.
    case plaintextOffLoopback(String)

    public var description: String {
        switch self {
        case .plaintextOffLoopback(let host):
            "plaintext on \(host), which is not a loopback address; use mutual TLS, or allowNonLoopback if the network is trusted"
        }
    }
}
#endif

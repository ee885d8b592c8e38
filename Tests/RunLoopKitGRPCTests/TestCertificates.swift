#if GRPC
import Crypto
import FoundationEssentials
import GRPCNIOTransportHTTP2
import RunLoopKitGRPC
import X509

/// Certificates made at run time for the mutual-TLS tests (nothing is committed): a CA, a
/// server certificate for localhost, and client certificates by common name, each with its
/// key, as PEM.
struct TestAuthority {
    let name: String
    let key = P256.Signing.PrivateKey()
    let certificate: Certificate

    init(name: String) throws {
        self.name = name
        let subject = try DistinguishedName { CommonName(name) }
        certificate = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date.now - 3600, notValidAfter: Date.now + 86_400, issuer: subject, subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true))
            },
            issuerPrivateKey: Certificate.PrivateKey(key))
    }

    /// A leaf certificate for `commonName`, valid for TLS servers and clients, naming localhost.
    func issue(_ commonName: String) throws -> Identity {
        let key = P256.Signing.PrivateKey()
        let leaf = try Certificate(
            version: .v3, serialNumber: Certificate.SerialNumber(), publicKey: Certificate.PublicKey(key.publicKey),
            notValidBefore: Date.now - 3600, notValidAfter: Date.now + 86_400,
            issuer: certificate.subject, subject: try DistinguishedName { CommonName(commonName) },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth, .clientAuth])
                SubjectAlternativeNames([.dnsName("localhost")])
            },
            issuerPrivateKey: Certificate.PrivateKey(self.key))
        return Identity(certificatePEM: try leaf.serializeAsPEM().pemString, keyPEM: key.pemRepresentation)
    }

    var pem: String { (try? certificate.serializeAsPEM().pemString) ?? "" }

    /// Mutual TLS for a side holding `identity` and trusting this authority.
    func security(for identity: Identity) -> BridgeSecurity {
        .mutualTLS(certificateChain: [.bytes(Array(identity.certificatePEM.utf8), format: .pem)],
                   privateKey: .bytes(Array(identity.keyPEM.utf8), format: .pem),
                   trustRoots: [.bytes(Array(pem.utf8), format: .pem)])
    }
}

struct Identity {
    let certificatePEM: String
    let keyPEM: String
}
#endif

#if GRPC
import RunLoopKit
import X509

/// The verified identity of the remote client a message came from over the bridge: the
/// client certificate that mutual TLS verified against the server's trust roots, and the
/// peer's network address. It sits beside `Message.sender`, which stays the kernel-verified
/// pid/uid/gid of a local process and is nil for bridged messages.
public struct RemotePeer: Sendable, Hashable, CustomStringConvertible {
    /// The peer's address as gRPC reports it (`ipv4:127.0.0.1:50312`).
    public let address: String
    /// The verified client certificate; nil over plaintext.
    public let certificate: Certificate?

    /// The common names of the certificate's subject. Any thread; free.
    public var commonNames: [String] {
        certificate?.subject.flatMap { $0 }.compactMap { attribute in
            attribute.type == .RDNAttributeType.commonName ? String(describing: attribute.value) : nil
        } ?? []
    }

    /// The DNS names of the certificate's subject alternative names. Any thread; parses the extension.
    public var dnsNames: [String] {
        guard let names = try? certificate?.extensions.subjectAlternativeNames else { return [] }
        return names.compactMap { if case .dnsName(let name) = $0 { name } else { nil } }
    }

    /// The names an access policy matches: common names, then DNS names. Any thread.
    public var identities: [String] { commonNames + dnsNames }

    public var description: String {
        certificate == nil ? "RemotePeer(\(address), plaintext)" : "RemotePeer(\(address), \(identities))"
    }
}

/// The `origin` a bridged message carries.
final class RemoteOrigin: Sendable {
    let peer: RemotePeer
    init(peer: RemotePeer) { self.peer = peer }
}

extension MessagePort.Message {
    /// For a message that came over a gRPC bridge, the remote client's verified identity; nil
    /// for a message sent on this host. Any thread; free.
    public var remotePeer: RemotePeer? { (origin as? RemoteOrigin)?.peer }
}
#endif

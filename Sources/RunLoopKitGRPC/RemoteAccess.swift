#if GRPC
/// Which remote clients an exported name admits, decided from the verified client
/// certificate only (`MessagePort.Access` decides from kernel credentials, which do not
/// cross hosts).
public struct RemoteAccess: Sendable, Equatable, CustomStringConvertible {
    enum Rule: Sendable, Equatable {
        case anyVerifiedClient
        case identities(Set<String>)
        case anyone
    }

    let rule: Rule

    /// Every client whose certificate chains to the server's trust roots. The default; over
    /// plaintext it admits nobody.
    public static let anyVerifiedClient = RemoteAccess(rule: .anyVerifiedClient)
    /// Clients with a verified certificate whose subject common name or a DNS subject
    /// alternative name is one of `names`.
    public static func identities(_ names: Set<String>) -> RemoteAccess { RemoteAccess(rule: .identities(names)) }
    /// Every client, certificate or not: for plaintext bridges, which can verify nobody.
    public static let anyone = RemoteAccess(rule: .anyone)

    /// Whether `peer` may reach the name.
    func admits(_ peer: RemotePeer) -> Bool {
        switch rule {
        case .anyone: true
        case .anyVerifiedClient: peer.certificate != nil
        case .identities(let names): peer.certificate != nil && peer.identities.contains(where: names.contains)
        }
    }

    public var description: String {
        switch rule {
        case .anyVerifiedClient: "anyVerifiedClient"
        case .identities(let names): "identities(\(names.sorted()))"
        case .anyone: "anyone"
        }
    }
}
#endif

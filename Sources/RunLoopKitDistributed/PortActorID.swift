#if canImport(Glibc)
import Glibc
#endif

/// The identity of a distributed actor of a `PortActorSystem`.
///
/// A client names an actor by the name it was published under (`.named("store")`), optionally
/// with the effective uid of the process that published it, for a name another non-root user
/// published (Guarantees §3.25: names are scoped per user; `connect(to:publishedBy:)`). The system
/// gives every actor it creates an identity of its own, which only that system resolves: an
/// actor is reachable from another process by the name it is published under, never by that
/// identity.
public struct PortActorID: Hashable, Sendable, Codable, CustomStringConvertible {
    enum Kind: Hashable, Sendable {
        /// A published name, in the caller's own scope then the system's (nil), or in one user's.
        case named(String, publisher: UInt32?)
        /// An actor a system created: its process and its number there.
        case assigned(process: Int32, serial: UInt64)
    }

    let kind: Kind

    init(kind: Kind) {
        self.kind = kind
    }

    /// The actor published as `name` (1–100 bytes of `[A-Za-z0-9._-]`, Guarantees §3.25), looked up
    /// in the caller's own scope then the system's, or with `uid` in that user's scope only. A
    /// name that is not valid makes calls throw `PortError.invalidName`. Any thread; free.
    public static func named(_ name: String, publishedBy uid: UInt32? = nil) -> PortActorID {
        PortActorID(kind: .named(name, publisher: uid))
    }

    /// The published name this identity names, nil for an identity a system assigned. Any
    /// thread; free.
    public var name: String? {
        if case .named(let name, _) = kind { name } else { nil }
    }

    /// The uid whose scope `name` is looked up in, nil for the caller's own scope then the
    /// system's (or for an assigned identity). Any thread; free.
    public var publisher: UInt32? {
        if case .named(_, let uid) = kind { uid } else { nil }
    }

    /// `store`, `store (published by uid 1000)`, or `actor 3 of pid 4242` for an assigned one.
    /// Any thread; allocates the string.
    public var description: String {
        switch kind {
        case .named(let name, nil): name
        case .named(let name, let uid?): "\(name) (published by uid \(uid))"
        case .assigned(let process, let serial): "actor \(serial) of pid \(process)"
        }
    }

    private enum CodingKeys: String, CodingKey {
        case name, uid, pid, serial
    }

    /// Reads `{"name": …, "uid": …}` (uid optional) or `{"pid": …, "serial": …}`. Throws a
    /// `DecodingError` for anything else. Any thread.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let name = try container.decodeIfPresent(String.self, forKey: .name) {
            kind = .named(name, publisher: try container.decodeIfPresent(UInt32.self, forKey: .uid))
        } else {
            kind = .assigned(process: try container.decode(Int32.self, forKey: .pid),
                             serial: try container.decode(UInt64.self, forKey: .serial))
        }
    }

    /// Writes the form `init(from:)` reads. Any thread.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch kind {
        case .named(let name, let uid):
            try container.encode(name, forKey: .name)
            try container.encodeIfPresent(uid, forKey: .uid)
        case .assigned(let process, let serial):
            try container.encode(process, forKey: .pid)
            try container.encode(serial, forKey: .serial)
        }
    }
}

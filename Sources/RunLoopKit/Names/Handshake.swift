/// The named-port handshake (Protocols/named-ports.md §4): one record each way before the
/// connection carries frames. The connecting process sends HELLO with the name it wants; the
/// owner answers WELCOME (the connection is now a send right), DENIED (access refused),
/// UNKNOWN_NAME (another name owns this address) or TOO_MANY_CONNECTIONS (the connecting user
/// holds as many connections to the name as the owner allows one user), and closes the
/// connection unless WELCOME.
///
///     0  4  magic "RLKN" (52 4C 4B 4E)
///     4  1  version (1)
///     5  1  kind: 1 HELLO, 2 WELCOME, 3 DENIED, 4 UNKNOWN_NAME, 5 TOO_MANY_CONNECTIONS
///     6  1  name length n (HELLO: 1–100; the answers: 0)
///     7  1  reserved, zero
///     8  n  the name (HELLO only)
///
/// Package-visible for the fuzz targets under Fuzz/.
package enum Handshake: Equatable, Sendable {
    case hello(name: [UInt8])
    case welcome
    case denied
    case unknownName
    case tooManyConnections

    static let magic: [UInt8] = [0x52, 0x4C, 0x4B, 0x4E]
    static let version: UInt8 = 1
    static let headerSize = 8
    /// The longest valid record: a HELLO with a 100-byte name.
    static let maximumSize = headerSize + PortName.maximumLength

    var kind: UInt8 {
        switch self {
        case .hello: 1
        case .welcome: 2
        case .denied: 3
        case .unknownName: 4
        case .tooManyConnections: 5
        }
    }

    package func encode() -> [UInt8] {
        var name: [UInt8] = []
        if case .hello(let bytes) = self { name = bytes }
        return Self.magic + [Self.version, kind, UInt8(truncatingIfNeeded: name.count), 0] + name
    }

    /// Which records a side accepts: the owner reads only HELLO, the connecting side only the
    /// four answers.
    package enum Expected {
        case hello, answer
    }

    /// Validates a record in the order of named-ports.md §4.3; the first failing check names
    /// the reason.
    package static func decode(_ bytes: [UInt8], expecting expected: Expected) throws(HandshakeError) -> Handshake {
        guard bytes.count >= headerSize else { throw .truncated }
        guard bytes[0..<4].elementsEqual(magic) else { throw .badMagic }
        guard bytes[4] == version else { throw .unsupportedVersion }
        let kind = bytes[5]
        switch expected {
        case .hello: guard kind == 1 else { throw .unexpectedKind }
        case .answer: guard (2...5).contains(kind) else { throw .unexpectedKind }
        }
        guard bytes[7] == 0 else { throw .reservedBytes }
        let length = Int(bytes[6])
        guard bytes.count == headerSize + length else { throw .lengthMismatch }
        switch kind {
        case 1:
            let name = Array(bytes[headerSize...])
            guard PortName.isValid(name) else { throw .invalidName }
            return .hello(name: name)
        default:
            guard length == 0 else { throw .invalidName }
            switch kind {
            case 2: return .welcome
            case 3: return .denied
            case 4: return .unknownName
            default: return .tooManyConnections
            }
        }
    }
}

/// Why a named-port handshake failed (Protocols/named-ports.md §4.3, §6). The owner drops the
/// connection and reports `PortError.handshakeFailed(reason)` through the port's transport
/// error handler; `connect(to:)` throws it when the owner's answer is malformed.
public enum HandshakeError: String, Error, Equatable, Sendable, CaseIterable {
    /// Fewer than the 8 header bytes (an empty record is end-of-stream).
    case truncated
    /// The first four bytes are not "RLKN".
    case badMagic
    /// A version this implementation does not speak.
    case unsupportedVersion
    /// A record of the wrong kind for this side (an answer sent to the owner, a HELLO sent back).
    case unexpectedKind
    /// The reserved byte is not zero.
    case reservedBytes
    /// The record's size is not 8 plus the name length.
    case lengthMismatch
    /// The name is not 1–100 bytes of `[A-Za-z0-9._-]` (or an answer carries one).
    case invalidName
    /// Descriptors, a truncated record or ancillary data other than the kernel's credentials.
    case unexpectedControlMessage
    /// The record came without SCM_CREDENTIALS, so the sender is unknown.
    case missingCredentials
    /// No HELLO arrived within the owner's handshake timeout.
    case timedOut
    /// Too many connections were waiting for their HELLO; the oldest was dropped.
    case crowdedOut
    /// The HELLO names another name than the one published at this address (a hash collision
    /// of two long names, or a client of a previous owner).
    case wrongName
}

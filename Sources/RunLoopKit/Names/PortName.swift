/// A validated port name and where it lives (Protocols/named-ports.md §2–3): 1–100 bytes of
/// `[A-Za-z0-9._-]`, bound in the abstract AF_UNIX namespace under the publisher's uid, so
/// that each user has a namespace of their own and uid 0's is the system's.
struct PortName: Hashable, Sendable, CustomStringConvertible {
    let text: String
    let bytes: [UInt8]

    static let maximumLength = 100
    /// sun_path holds 108 bytes; an abstract name starts after the leading NUL.
    static let maximumAddressLength = 107
    static let addressPrefix = Array("runloopkit/".utf8)

    /// Validates `text`; `.invalidName` unless it is 1–100 bytes of `[A-Za-z0-9._-]` (so never a
    /// path: no `/`; `.` and `..` are plain names, since no file system is involved).
    init(_ text: String) throws(PortError) {
        let bytes = Array(text.utf8)
        guard Self.isValid(bytes) else { throw .invalidName(text) }
        self.text = text
        self.bytes = bytes
    }

    init?(validating bytes: [UInt8]) {
        guard Self.isValid(bytes) else { return nil }
        self.bytes = bytes
        text = String(decoding: bytes, as: UTF8.self)
    }

    static func isValid(_ bytes: [UInt8]) -> Bool {
        guard (1...maximumLength).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }

    /// The abstract socket name (the bytes after sun_path's NUL) of this name in the scope of
    /// `uid`: `runloopkit/<uid>/<name>`, or, when that exceeds 107 bytes,
    /// `runloopkit/<uid>/~<FNV-1a-64 of the name, 16 lowercase hex digits>`.
    func address(uid: UInt32) -> [UInt8] {
        let scope = Self.addressPrefix + Array(String(uid).utf8) + [UInt8(ascii: "/")]
        if scope.count + bytes.count <= Self.maximumAddressLength { return scope + bytes }
        let digest = String(Self.fnv1a64(bytes), radix: 16)
        return scope + [UInt8(ascii: "~")] + Array((String(repeating: "0", count: 16 - digest.count) + digest).utf8)
    }

    static func fnv1a64(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }

    /// The scope uid and whether `address` is this name's address in it (socket activation:
    /// the socket systemd passed must be bound where clients look).
    func scope(ofAddress address: [UInt8]) -> UInt32? {
        guard address.starts(with: Self.addressPrefix) else { return nil }
        let rest = address.dropFirst(Self.addressPrefix.count)
        guard let slash = rest.firstIndex(of: UInt8(ascii: "/")),
              let uid = UInt32(String(decoding: rest[..<slash], as: UTF8.self)),
              self.address(uid: uid) == address else { return nil }
        return uid
    }

    var description: String { text }
}

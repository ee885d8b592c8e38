#if GRPC
import FoundationEssentials

/// One message of the bridge's bidirectional stream, as Protocols/grpc-bridge-frame.md
/// specifies it: the stream's opening (`open`, `accept`), a message for the exported port
/// (`message`) and a reply to one of the client's reply ports (`reply`).
public enum BridgeFrame: Sendable, Equatable {
    /// Client → server, first frame: the exported name to reach.
    case open(name: String)
    /// Server → client, first frame: the name is exported and the client admitted.
    case accept
    /// Client → server: a message for the exported port. `replyID` (nonzero) names the
    /// client's reply port; `timeout` is how long the sender waits for a reply.
    case message(msgid: UInt32, replyID: UInt32, timeout: Duration?, data: [Data])
    /// Server → client: a message for the client's reply port numbered `replyID`.
    case reply(msgid: UInt32, replyID: UInt32, data: [Data])

    /// The protocol version this build writes and reads.
    public static let version: UInt8 = 1
    /// The most Data components one frame carries.
    public static let maximumComponents = 64
    /// The largest frame, in bytes (header, table and data): the gRPC message size limit of the
    /// bridge's RPC. Any thread; free.
    public static let maximumFrameSize = 4 * 1024 * 1024

    enum Kind: UInt8 {
        case open = 1, accept = 2, message = 3, reply = 4
    }

    /// Encodes the frame. Any thread; one allocation of the frame's size.
    /// Throws `.messageTooLarge` above `maximumFrameSize` or `maximumComponents`.
    public func encoded() throws(BridgeFrameError) -> [UInt8] {
        var out: [UInt8] = []
        switch self {
        case .open(let name):
            out.reserveCapacity(4 + name.utf8.count)
            out += [Self.version, Kind.open.rawValue, 0, 0]
            out += name.utf8
        case .accept:
            out = [Self.version, Kind.accept.rawValue, 0, 0]
        case .message(let msgid, let replyID, let timeout, let data):
            let nanoseconds = timeout.map { max(1, Self.nanoseconds($0)) } ?? 0
            try Self.encodeBody(kind: .message, msgid: msgid, replyID: replyID, timeout: nanoseconds, data: data, into: &out)
        case .reply(let msgid, let replyID, let data):
            try Self.encodeBody(kind: .reply, msgid: msgid, replyID: replyID, timeout: 0, data: data, into: &out)
        }
        return out
    }

    /// Decodes one frame; every violation of the specification is a `BridgeFrameError`.
    /// Any thread; copies each component's bytes once.
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(BridgeFrameError) -> BridgeFrame {
        guard bytes.count >= 4 else { throw .truncated }
        guard bytes.count <= maximumFrameSize else { throw .tooLarge }
        guard bytes[0] == version else { throw .unsupportedVersion }
        guard bytes[2] == 0, bytes[3] == 0 else { throw .reservedNotZero }
        guard let kind = Kind(rawValue: bytes[1]) else { throw .unknownKind }
        switch kind {
        case .open:
            let name = bytes[4...]
            guard (1...100).contains(name.count), name.allSatisfy(Self.isNameByte) else { throw .invalidName }
            return .open(name: String(decoding: name, as: UTF8.self))
        case .accept:
            guard bytes.count == 4 else { throw .trailingBytes }
            return .accept
        case .message, .reply:
            return try decodeBody(kind: kind, bytes)
        }
    }

    /// Whether `byte` may appear in a port name (§3.25: `[A-Za-z0-9._-]`).
    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
            true
        default:
            false
        }
    }

    // header, msgid, reply id, reserved, timeout, count, reserved
    private static let bodyHeaderSize = 4 + 4 + 4 + 4 + 8 + 2 + 2

    private static func nanoseconds(_ duration: Duration) -> UInt64 {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ min(UInt64(attoseconds / 1_000_000_000), .max - whole)
    }

    private static func encodeBody(kind: Kind, msgid: UInt32, replyID: UInt32, timeout: UInt64, data: [Data],
                                   into out: inout [UInt8]) throws(BridgeFrameError) {
        guard data.count <= maximumComponents else { throw .tooManyComponents }
        var size = bodyHeaderSize + 4 * data.count
        for component in data {
            size += component.count
            guard size <= maximumFrameSize else { throw .tooLarge }
        }
        out.reserveCapacity(size)
        out += [version, kind.rawValue, 0, 0]
        append(msgid, to: &out)
        append(replyID, to: &out)
        append(UInt32(0), to: &out)
        append(timeout, to: &out)
        append(UInt16(data.count), to: &out)
        append(UInt16(0), to: &out)
        for component in data { append(UInt32(component.count), to: &out) }
        for component in data { out += component }
    }

    private static func decodeBody(kind: Kind, _ bytes: UnsafeRawBufferPointer) throws(BridgeFrameError) -> BridgeFrame {
        guard bytes.count >= bodyHeaderSize else { throw .truncated }
        let msgid = read(UInt32.self, bytes, at: 4)
        let replyID = read(UInt32.self, bytes, at: 8)
        guard read(UInt32.self, bytes, at: 12) == 0, read(UInt16.self, bytes, at: 26) == 0 else { throw .reservedNotZero }
        let timeout = read(UInt64.self, bytes, at: 16)
        let count = Int(read(UInt16.self, bytes, at: 24))
        guard count <= maximumComponents else { throw .tooManyComponents }
        if kind == .reply {
            guard replyID != 0 else { throw .missingReplyID }
            guard timeout == 0 else { throw .timeoutOnReply }
        }
        let tableEnd = bodyHeaderSize + 4 * count
        guard bytes.count >= tableEnd else { throw .truncated }
        var offset = tableEnd
        var data: [Data] = []
        data.reserveCapacity(count)
        for index in 0..<count {
            let length = Int(read(UInt32.self, bytes, at: bodyHeaderSize + 4 * index))
            guard length <= bytes.count - offset else { throw .lengthMismatch }
            data.append(Data(bytes[offset..<offset + length]))
            offset += length
        }
        guard offset == bytes.count else { throw .lengthMismatch }
        if kind == .reply { return .reply(msgid: msgid, replyID: replyID, data: data) }
        return .message(msgid: msgid, replyID: replyID, timeout: timeout == 0 ? nil : .nanoseconds(Int64(clamping: timeout)),
                        data: data)
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { out += $0 }
    }

    private static func read<T: FixedWidthInteger>(_ type: T.Type, _ bytes: UnsafeRawBufferPointer, at offset: Int) -> T {
        T(littleEndian: bytes.loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

/// Why a bridge frame was refused (Protocols/grpc-bridge-frame.md §5). The stream that sent
/// it is ended with `invalidArgument`; other streams are not affected.
public enum BridgeFrameError: String, Error, Sendable {
    case truncated = "frame shorter than its header or table"
    case tooLarge = "frame larger than the maximum frame size"
    case unsupportedVersion = "unsupported version"
    case unknownKind = "unknown frame kind"
    case reservedNotZero = "reserved bytes not zero"
    case invalidName = "OPEN name not 1–100 bytes of [A-Za-z0-9._-]"
    case trailingBytes = "bytes after the end of the frame"
    case tooManyComponents = "more components than the maximum"
    case lengthMismatch = "component lengths do not add up to the frame's size"
    case missingReplyID = "REPLY without a reply id"
    case timeoutOnReply = "REPLY with a timeout"
    case unexpectedKind = "frame kind not allowed at this point of the stream"
}
#endif

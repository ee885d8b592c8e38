/// The wire form of a message on the cross-process transport, as specified normatively in
/// `Protocols/port-message-frame.md`. One frame is one SOCK_SEQPACKET record; its port
/// components (and reply port) travel as SCM_RIGHTS descriptors of the same `sendmsg`.
///
/// Layout, little-endian:
///
///     0   4  magic "RLKM" (52 4C 4B 4D)
///     4   1  version (1)
///     5   1  flags (bit 0: REPLY_PORT; bits 1–7 reserved, zero)
///     6   2  component count N (0…64)
///     8   4  msgid
///     12  4  body length L (bytes of DATA after the table)
///     16  8N component table: kind u8 (1 DATA, 2 PORT), 3 reserved zero bytes, length u32
///     16+8N L  the DATA bytes, in table order
struct PortFrame: Equatable, Sendable {
    enum Component: Equatable, Sendable {
        case data([UInt8])
        case port
    }

    var msgid: UInt32
    var components: [Component]
    var hasReplyPort: Bool

    static let magic: [UInt8] = [0x52, 0x4C, 0x4B, 0x4D]
    static let version: UInt8 = 1
    static let replyPortFlag: UInt8 = 0x01
    static let headerSize = 16
    static let componentEntrySize = 8
    static let maximumComponents = 64
    /// The largest frame, header and table included. Kept well under the default AF_UNIX
    /// socket buffer (net.core.wmem_default, 208 KiB) so one frame always fits.
    static let maximumFrameSize = 65_536
    /// Port components plus the reply port.
    static let maximumDescriptors = maximumComponents + 1

    /// The number of SCM_RIGHTS descriptors the frame carries.
    var descriptorCount: Int {
        components.count { $0 == .port } + (hasReplyPort ? 1 : 0)
    }

    /// The frame's bytes. Throws `.messageTooLarge` beyond `maximumFrameSize` or
    /// `maximumComponents`.
    func encode() throws(PortError) -> [UInt8] {
        guard components.count <= Self.maximumComponents else {
            throw .messageTooLarge(limit: Self.maximumFrameSize)
        }
        var bodyLength = 0
        for case .data(let bytes) in components { bodyLength += bytes.count }
        let size = Self.headerSize + Self.componentEntrySize * components.count + bodyLength
        guard size <= Self.maximumFrameSize else { throw .messageTooLarge(limit: Self.maximumFrameSize) }

        var out: [UInt8] = []
        out.reserveCapacity(size)
        out += Self.magic
        out.append(Self.version)
        out.append(hasReplyPort ? Self.replyPortFlag : 0)
        out.appendLittleEndian(UInt16(components.count))
        out.appendLittleEndian(msgid)
        out.appendLittleEndian(UInt32(bodyLength))
        for component in components {
            switch component {
            case .data(let bytes):
                out += [1, 0, 0, 0]
                out.appendLittleEndian(UInt32(bytes.count))
            case .port:
                out += [2, 0, 0, 0]
                out.appendLittleEndian(UInt32(0))
            }
        }
        for case .data(let bytes) in components { out += bytes }
        return out
    }

    /// Parses and validates a frame received with `descriptorCount` descriptors, in the
    /// order of checks the specification gives (§5).
    static func decode(_ bytes: some Collection<UInt8>, descriptorCount: Int) throws(FrameError) -> PortFrame {
        // Contiguous input (the receive buffer, an array) is read in place; anything else copied once.
        let result = bytes.withContiguousStorageIfAvailable {
            parse(UnsafeRawBufferPointer($0), descriptorCount: descriptorCount)
        } ?? Array(bytes).withUnsafeBytes { parse($0, descriptorCount: descriptorCount) }
        return try result.get()
    }

    private static func parse(_ bytes: UnsafeRawBufferPointer, descriptorCount: Int) -> Result<PortFrame, FrameError> {
        do {
            return .success(try parseThrowing(bytes, descriptorCount: descriptorCount))
        } catch {
            return .failure(error)
        }
    }

    private static func parseThrowing(_ bytes: UnsafeRawBufferPointer, descriptorCount: Int) throws(FrameError) -> PortFrame {
        guard bytes.count <= maximumFrameSize else { throw .frameTooLarge }
        guard bytes.count >= headerSize else { throw .truncatedHeader }
        guard bytes.prefix(4).elementsEqual(magic) else { throw .badMagic }
        guard bytes[4] == version else { throw .unsupportedVersion }
        let flags = bytes[5]
        guard flags & ~replyPortFlag == 0 else { throw .reservedFlags }
        let count = Int(bytes.loadLittleEndian(UInt16.self, at: 6))
        guard count <= maximumComponents else { throw .tooManyComponents }
        let msgid = bytes.loadLittleEndian(UInt32.self, at: 8)
        let bodyLength = Int(bytes.loadLittleEndian(UInt32.self, at: 12))
        let tableEnd = headerSize + componentEntrySize * count
        guard bytes.count >= tableEnd, bytes.count - tableEnd == bodyLength else { throw .lengthMismatch }

        var lengths: [(kind: UInt8, length: Int)] = []
        lengths.reserveCapacity(count)
        for index in 0..<count {
            let entry = headerSize + componentEntrySize * index
            let kind = bytes[entry]
            guard kind == 1 || kind == 2 else { throw .badComponentKind }
            guard bytes[entry + 1] == 0, bytes[entry + 2] == 0, bytes[entry + 3] == 0 else { throw .reservedBytes }
            let length = Int(bytes.loadLittleEndian(UInt32.self, at: entry + 4))
            guard kind == 1 || length == 0 else { throw .portLength }
            lengths.append((kind, length))
        }
        guard lengths.reduce(0, { $0 + $1.length }) == bodyLength else { throw .lengthMismatch }

        let hasReplyPort = flags & replyPortFlag != 0
        let ports = lengths.count { $0.kind == 2 }
        guard descriptorCount == ports + (hasReplyPort ? 1 : 0) else { throw .descriptorCountMismatch }

        var offset = tableEnd
        let components = lengths.map { entry -> Component in
            guard entry.kind == 1 else { return .port }
            defer { offset += entry.length }
            return .data([UInt8](UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + entry.length])))
        }
        return PortFrame(msgid: msgid, components: components, hasReplyPort: hasReplyPort)
    }
}

extension [UInt8] {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

extension UnsafeRawBufferPointer {
    func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        var value: T = 0
        for index in (0..<MemoryLayout<T>.size).reversed() {
            value = value << 8 | T(self[offset + index])
        }
        return value
    }
}

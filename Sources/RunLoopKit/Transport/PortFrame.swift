import FoundationEssentials

/// The wire form of a message on the cross-process transport, as specified normatively in
/// `Protocols/port-message-frame.md`. One frame is one SOCK_SEQPACKET record; its port
/// components (and reply port) travel as SCM_RIGHTS descriptors of the same `sendmsg`.
///
/// Layout, little-endian:
///
///     0   4  magic "RLKM" (52 4C 4B 4D)
///     4   1  version (1)
///     5   1  flags (bit 0: REPLY_PORT; bit 1: METADATA; bit 2: SEND_ONCE, only with
///                REPLY_PORT; bits 3–7 reserved, zero)
///     6   2  component count N (0…64)
///     8   4  msgid
///     12  4  body length L (bytes of DATA after the table)
///     16  8N component table: kind u8 (1 DATA, 2 PORT, 3 MEMORY), 3 bytes, length u32
///     16+8N L  the DATA bytes, in table order
///
/// An entry's three bytes after the kind are reserved (zero) for DATA and PORT; for MEMORY
/// they are bits 32–55 of its length. A MEMORY component's bytes are not in the frame: they are
/// a sealed memfd, whose descriptor travels with the PORT components' in table order.
///
/// `PortFrame` is the frame as a value (the test vectors' view); the transport writes and
/// reads frames in place through `FrameWriter` and `FrameReader`, which this type uses too.
/// Package-visible for the fuzz targets under Fuzz/.
package struct PortFrame: Equatable, Sendable {
    package enum Component: Equatable, Sendable {
        case data([UInt8])
        case port
        /// Sealed memory of this many bytes, whose descriptor travels with the frame.
        case memory(Int)
    }

    package var msgid: UInt32
    package var components: [Component]
    package var hasReplyPort: Bool
    /// Whether the reply port is a send-once right (flag SEND_ONCE, §3.50): its receiver's proxy
    /// takes one send. Only with `hasReplyPort`.
    package var replyIsSendOnce = false
    /// The METADATA section (a sender's trace context); nil when the flag is clear.
    package var metadata: MessageMetadata? = nil

    /// "RLKM" (52 4C 4B 4D) read as a little-endian word, so checking it is one comparison.
    static let magic: UInt32 = 0x4D4B_4C52
    static let version: UInt8 = 1
    static let replyPortFlag: UInt8 = 0x01
    static let metadataFlag: UInt8 = 0x02
    static let sendOnceFlag: UInt8 = 0x04
    static let headerSize = 16
    static let componentEntrySize = 8
    static let maximumComponents = 64
    /// The largest frame, header and table included. Kept well under the default AF_UNIX
    /// socket buffer (net.core.wmem_default, 208 KiB) so one frame always fits.
    static let maximumFrameSize = 65_536
    /// Port and memory components plus the reply port.
    static let maximumDescriptors = maximumComponents + 1

    /// The number of SCM_RIGHTS descriptors the frame carries.
    var descriptorCount: Int {
        components.count { $0.frameDataLength == nil } + (hasReplyPort ? 1 : 0)
    }

    /// The frame's bytes. Throws `.messageTooLarge` beyond `maximumFrameSize` or
    /// `maximumComponents`.
    package func encode() throws(PortError) -> [UInt8] {
        let size = try FrameWriter.size(of: components, metadata: metadata)
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            FrameWriter.write(msgid: msgid, hasReplyPort: hasReplyPort, replyIsSendOnce: replyIsSendOnce,
                              components: components, metadata: metadata, into: UnsafeMutableRawBufferPointer(buffer))
            count = size
        }
    }

    /// Parses and validates a frame received with `descriptorCount` descriptors, in the
    /// order of checks the specification gives (§5).
    package static func decode(_ bytes: some Collection<UInt8>, descriptorCount: Int) throws(FrameError) -> PortFrame {
        // Contiguous input (an array, the receive buffer) is read in place; anything else copied once.
        let result = bytes.withContiguousStorageIfAvailable {
            decode(UnsafeRawBufferPointer($0), descriptorCount: descriptorCount)
        } ?? Array(bytes).withUnsafeBytes { decode($0, descriptorCount: descriptorCount) }
        return try result.get()
    }

    private static func decode(_ bytes: UnsafeRawBufferPointer, descriptorCount: Int) -> Result<PortFrame, FrameError> {
        do {
            let reader = try FrameReader(validating: bytes, descriptorCount: descriptorCount)
            var components: [Component] = []
            reader.forEachComponent { entry in
                switch entry {
                case .data(let bytes): components.append(.data([UInt8](bytes)))
                case .port: components.append(.port)
                case .memory(let length): components.append(.memory(length))
                }
            }
            return .success(PortFrame(msgid: reader.msgid, components: components, hasReplyPort: reader.hasReplyPort,
                                      replyIsSendOnce: reader.replyIsSendOnce,
                                      metadata: reader.metadata()))
        } catch {
            return .failure(error)
        }
    }
}

/// Something that can be a frame component: DATA with a length and bytes, a PORT, or MEMORY.
protocol FrameComponent {
    /// The DATA length, or nil for a PORT or MEMORY.
    var frameDataLength: Int? { get }
    /// The MEMORY length, or nil for DATA or a PORT.
    var frameMemoryLength: Int? { get }
    /// Copies the DATA bytes (exactly `frameDataLength` of them) into `destination`.
    func copyFrameData(into destination: UnsafeMutableRawBufferPointer)
}

extension FrameComponent {
    var frameMemoryLength: Int? { nil }
}

extension PortFrame.Component: FrameComponent {
    var frameDataLength: Int? {
        if case .data(let bytes) = self { bytes.count } else { nil }
    }

    var frameMemoryLength: Int? {
        if case .memory(let length) = self { length } else { nil }
    }

    func copyFrameData(into destination: UnsafeMutableRawBufferPointer) {
        if case .data(let bytes) = self { destination.copyBytes(from: bytes) }
    }
}

/// Writes frames in place: the size first (with the protocol's limits), then the bytes.
enum FrameWriter {
    /// The frame size for `components` and `metadata`; `.messageTooLarge` beyond the protocol's
    /// limits (metadata beyond them never gets here: `MessageContext` bounds it at the send).
    static func size<C: Collection>(of components: C, metadata: MessageMetadata? = nil) throws(PortError) -> Int
    where C.Element: FrameComponent {
        guard components.count <= PortFrame.maximumComponents else {
            throw .messageTooLarge(limit: PortFrame.maximumFrameSize)
        }
        let body = components.reduce(0) { $0 + ($1.frameDataLength ?? 0) }
        var size = PortFrame.headerSize + PortFrame.componentEntrySize * components.count + body
        if let metadata {
            guard let section = metadata.frameSectionSize else { throw .messageTooLarge(limit: PortFrame.maximumFrameSize) }
            size += section
        }
        guard size <= PortFrame.maximumFrameSize else { throw .messageTooLarge(limit: PortFrame.maximumFrameSize) }
        return size
    }

    /// The frame size of the usual message: one DATA component of `length` bytes, no port.
    static func size(ofSingleData length: Int) throws(PortError) -> Int {
        let size = PortFrame.headerSize + PortFrame.componentEntrySize + length
        guard size <= PortFrame.maximumFrameSize else { throw .messageTooLarge(limit: PortFrame.maximumFrameSize) }
        return size
    }

    /// Writes the frame into `buffer`, which holds exactly `size(of: components, metadata: metadata)` bytes.
    static func write<C: Collection>(msgid: UInt32, hasReplyPort: Bool, replyIsSendOnce: Bool = false, components: C,
                                     metadata: MessageMetadata? = nil,
                                     into buffer: UnsafeMutableRawBufferPointer) where C.Element: FrameComponent {
        let sectionSize = metadata?.frameSectionSize ?? 0
        let flags = (hasReplyPort ? PortFrame.replyPortFlag : 0) | (hasReplyPort && replyIsSendOnce ? PortFrame.sendOnceFlag : 0)
        let tableEnd = writeHeader(msgid: msgid, replyFlags: flags, componentCount: components.count,
                                   sectionSize: sectionSize, into: buffer)
        var entry = PortFrame.headerSize
        var data = tableEnd
        for component in components {
            let length = component.frameDataLength
            if let memory = component.frameMemoryLength {
                writeEntry(kind: 3, length: memory, at: entry, into: buffer)
            } else {
                writeEntry(kind: length != nil ? 1 : 2, length: length ?? 0, at: entry, into: buffer)
            }
            if let length {
                component.copyFrameData(into: UnsafeMutableRawBufferPointer(rebasing: buffer[data..<data + length]))
                data += length
            }
            entry += PortFrame.componentEntrySize
        }
        if let metadata { writeMetadata(metadata, into: UnsafeMutableRawBufferPointer(rebasing: buffer[data...])) }
    }

    /// Writes the METADATA section into `section`, which holds exactly `metadata.frameSectionSize` bytes.
    private static func writeMetadata(_ metadata: MessageMetadata, into section: UnsafeMutableRawBufferPointer) {
        section.storeLittleEndian(UInt16(metadata.fields.count), at: 0)
        var offset = 2
        func put(_ string: String) {
            var string = string
            string.withUTF8 { bytes in
                section.storeLittleEndian(UInt16(bytes.count), at: offset)
                UnsafeMutableRawBufferPointer(rebasing: section[offset + 2..<offset + 2 + bytes.count])
                    .copyMemory(from: UnsafeRawBufferPointer(bytes))
                offset += 2 + bytes.count
            }
        }
        for field in metadata.fields {
            put(field.key)
            put(field.value)
        }
    }

    /// Writes the usual message's frame — one DATA component, `data`, and no reply port — into
    /// `buffer`, which holds exactly `size(ofSingleData: data.count)` bytes.
    static func write(msgid: UInt32, singleData data: Data, into buffer: UnsafeMutableRawBufferPointer) {
        let tableEnd = writeHeader(msgid: msgid, replyFlags: 0, componentCount: 1, into: buffer)
        writeEntry(kind: 1, length: data.count, at: PortFrame.headerSize, into: buffer)
        data.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: buffer[tableEnd...]).copyMemory(from: $0) }
    }

    /// Writes the header of a frame that fills `buffer`, whose last `sectionSize` bytes are the
    /// METADATA section (none when 0), with `replyFlags` (REPLY_PORT and SEND_ONCE, or 0); returns
    /// where the component table ends.
    private static func writeHeader(msgid: UInt32, replyFlags: UInt8, componentCount: Int, sectionSize: Int = 0,
                                    into buffer: UnsafeMutableRawBufferPointer) -> Int {
        let tableEnd = PortFrame.headerSize + PortFrame.componentEntrySize * componentCount
        buffer.storeLittleEndian(PortFrame.magic, at: 0)
        buffer[4] = PortFrame.version
        buffer[5] = replyFlags | (sectionSize > 0 ? PortFrame.metadataFlag : 0)
        buffer.storeLittleEndian(UInt16(componentCount), at: 6)
        buffer.storeLittleEndian(msgid, at: 8)
        buffer.storeLittleEndian(UInt32(buffer.count - tableEnd - sectionSize), at: 12)
        return tableEnd
    }

    /// Writes one component table entry: kind, then the length's bits 32–55 (zero but for
    /// MEMORY), then its low 32 bits.
    private static func writeEntry(kind: UInt8, length: Int, at entry: Int, into buffer: UnsafeMutableRawBufferPointer) {
        buffer[entry] = kind
        buffer[entry + 1] = UInt8(truncatingIfNeeded: length >> 32)
        buffer[entry + 2] = UInt8(truncatingIfNeeded: length >> 40)
        buffer[entry + 3] = UInt8(truncatingIfNeeded: length >> 48)
        buffer.storeLittleEndian(UInt32(truncatingIfNeeded: length), at: entry + 4)
    }
}

/// A received frame, validated in the order of checks the specification gives (§5), read in place.
struct FrameReader {
    let bytes: UnsafeRawBufferPointer
    let msgid: UInt32
    let hasReplyPort: Bool
    /// SEND_ONCE: the reply port takes one send (§3.50).
    let replyIsSendOnce: Bool
    let componentCount: Int
    /// The bytes of DATA the frame brings, inline and in MEMORY components together.
    let dataTotal: Int
    /// Whether a MEMORY component is among the components.
    let hasMemory: Bool
    /// Where the DATA bytes end: the frame's end, or the METADATA section's start.
    let bodyEnd: Int

    init(validating bytes: UnsafeRawBufferPointer, descriptorCount: Int) throws(FrameError) {
        guard bytes.count <= PortFrame.maximumFrameSize else { throw .frameTooLarge }
        guard bytes.count >= PortFrame.headerSize else { throw .truncatedHeader }
        guard bytes.loadLittleEndian(UInt32.self, at: 0) == PortFrame.magic else { throw .badMagic }
        guard bytes[4] == PortFrame.version else { throw .unsupportedVersion }
        let flags = bytes[5]
        // SEND_ONCE qualifies the reply port: without REPLY_PORT it is as reserved as bits 3–7.
        guard flags & ~(PortFrame.replyPortFlag | PortFrame.metadataFlag | PortFrame.sendOnceFlag) == 0,
              flags & PortFrame.sendOnceFlag == 0 || flags & PortFrame.replyPortFlag != 0
        else { throw .reservedFlags }
        let hasMetadata = flags & PortFrame.metadataFlag != 0
        let count = Int(bytes.loadLittleEndian(UInt16.self, at: 6))
        guard count <= PortFrame.maximumComponents else { throw .tooManyComponents }
        let bodyLength = Int(bytes.loadLittleEndian(UInt32.self, at: 12))
        let tableEnd = PortFrame.headerSize + PortFrame.componentEntrySize * count
        // With METADATA the section follows the body: the body ends before the frame does.
        guard bytes.count >= tableEnd,
              hasMetadata ? bytes.count - tableEnd >= bodyLength : bytes.count - tableEnd == bodyLength
        else { throw .lengthMismatch }

        var inlineTotal = 0
        var memoryTotal = 0
        var descriptorsDeclared = 0
        for index in 0..<count {
            let entry = PortFrame.headerSize + PortFrame.componentEntrySize * index
            let kind = bytes[entry]
            guard kind >= 1 && kind <= 3 else { throw .badComponentKind }
            let length = Int(bytes.loadLittleEndian(UInt32.self, at: entry + 4))
            if kind == 3 {
                let high = Int(bytes[entry + 1]) | Int(bytes[entry + 2]) << 8 | Int(bytes[entry + 3]) << 16
                let memory = high << 32 | length
                guard memory > 0 else { throw .memoryLength }
                // 64 components of at most 2^56 - 1 bytes: no overflow.
                memoryTotal += memory
                descriptorsDeclared += 1
                continue
            }
            guard bytes[entry + 1] == 0, bytes[entry + 2] == 0, bytes[entry + 3] == 0 else { throw .reservedBytes }
            if kind == 2 {
                guard length == 0 else { throw .portLength }
                descriptorsDeclared += 1
            }
            inlineTotal += length
        }
        guard inlineTotal == bodyLength else { throw .lengthMismatch }

        let hasReplyPort = flags & PortFrame.replyPortFlag != 0
        guard descriptorCount == descriptorsDeclared + (hasReplyPort ? 1 : 0) else { throw .descriptorCountMismatch }
        let bodyEnd = tableEnd + bodyLength
        if hasMetadata {
            guard Self.validMetadataSection(UnsafeRawBufferPointer(rebasing: bytes[bodyEnd...])) else { throw .badMetadata }
        }
        self.bytes = bytes
        self.bodyEnd = bodyEnd
        self.msgid = bytes.loadLittleEndian(UInt32.self, at: 8)
        self.hasReplyPort = hasReplyPort
        replyIsSendOnce = flags & PortFrame.sendOnceFlag != 0
        componentCount = count
        dataTotal = inlineTotal + memoryTotal
        hasMemory = memoryTotal > 0
    }

    /// The components in order, DATA copied into `Data`, each PORT taken from `nextPort` and
    /// each MEMORY from `nextMemory` (the frame was validated: it has a descriptor for each).
    func payload(nextPort: () -> MessagePort?, nextMemory: () -> Data?) -> MessagePort.Message.Payload {
        // The usual message, one DATA component, as a message keeps it: no array.
        if componentCount == 1 && bytes[PortFrame.headerSize] == 1 {
            let start = PortFrame.headerSize + PortFrame.componentEntrySize
            return .data(Data(bytes: bytes.baseAddress! + start, count: bodyEnd - start))
        }
        if componentCount == 1 && bytes[PortFrame.headerSize] == 3 { return .data(nextMemory()!) }
        var components: [MessagePort.Message.Component] = []
        components.reserveCapacity(componentCount)
        forEachComponent { entry in
            switch entry {
            case .data(let bytes): components.append(.data(bytes.isEmpty ? Data() : Data(bytes: bytes.baseAddress!, count: bytes.count)))
            case .port: components.append(.port(nextPort()!))
            case .memory: components.append(.data(nextMemory()!))
            }
        }
        return .components(components)
    }

    /// Whether `section` is a well-formed METADATA section that ends where it does (spec §3.6):
    /// a field count of 1…16, each key 1…256 and each value 0…4096 bytes of UTF-8.
    private static func validMetadataSection(_ section: UnsafeRawBufferPointer) -> Bool {
        guard section.count >= 2 else { return false }
        let count = Int(section.loadLittleEndian(UInt16.self, at: 0))
        guard count >= 1, count <= MessageMetadata.maximumFields else { return false }
        var offset = 2
        // One string: its u16 length within `limits`, its bytes within the section, valid UTF-8.
        func string(within limits: ClosedRange<Int>) -> Bool {
            guard section.count - offset >= 2 else { return false }
            let length = Int(section.loadLittleEndian(UInt16.self, at: offset))
            offset += 2
            guard limits.contains(length), section.count - offset >= length else { return false }
            let text = UnsafeRawBufferPointer(rebasing: section[offset..<offset + length])
            offset += length
            return String(validating: text, as: UTF8.self) != nil
        }
        for _ in 0..<count {
            guard string(within: 1...MessageMetadata.maximumKeyLength),
                  string(within: 0...MessageMetadata.maximumValueLength) else { return false }
        }
        return offset == section.count
    }

    /// The METADATA section's fields (validated), or nil when the frame has none.
    func metadata() -> MessageMetadata? {
        guard bodyEnd < bytes.count else { return nil }
        var fields: [MessageMetadata.Field] = []
        var offset = bodyEnd + 2
        func take() -> String {
            let length = Int(bytes.loadLittleEndian(UInt16.self, at: offset))
            let text = UnsafeRawBufferPointer(rebasing: bytes[offset + 2..<offset + 2 + length])
            offset += 2 + length
            return String(decoding: text, as: UTF8.self)
        }
        for _ in 0..<Int(bytes.loadLittleEndian(UInt16.self, at: bodyEnd)) {
            let key = take()
            fields.append(MessageMetadata.Field(key: key, value: take()))
        }
        return MessageMetadata(fields)
    }

    /// One component of a validated frame.
    enum Entry {
        /// DATA, with its bytes in the frame.
        case data(UnsafeRawBufferPointer)
        case port
        /// MEMORY of this many bytes.
        case memory(Int)
    }

    /// Calls `body` for each component in order.
    func forEachComponent(_ body: (Entry) -> Void) {
        var data = PortFrame.headerSize + PortFrame.componentEntrySize * componentCount
        for index in 0..<componentCount {
            let entry = PortFrame.headerSize + PortFrame.componentEntrySize * index
            let length = Int(bytes.loadLittleEndian(UInt32.self, at: entry + 4))
            switch bytes[entry] {
            case 1:
                body(.data(UnsafeRawBufferPointer(rebasing: bytes[data..<data + length])))
                data += length
            case 2:
                body(.port)
            default:
                let high = Int(bytes[entry + 1]) | Int(bytes[entry + 2]) << 8 | Int(bytes[entry + 3]) << 16
                body(.memory(high << 32 | length))
            }
        }
    }
}

extension UnsafeRawBufferPointer {
    func loadLittleEndian<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}

extension UnsafeMutableRawBufferPointer {
    func storeLittleEndian<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        storeBytes(of: value.littleEndian, toByteOffset: offset, as: T.self)
    }
}

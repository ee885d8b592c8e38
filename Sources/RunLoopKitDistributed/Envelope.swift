import FoundationEssentials
import RunLoopKit

/// The envelope of the distributed-call protocol (Protocols/distributed-envelope.md): the one
/// DATA component of every message a `PortActorSystem` sends. Little-endian:
///
///     0   4  magic "RLKD" (52 4C 4B 44)
///     4   1  version (1)
///     5   1  kind: 1 HELLO, 2 WELCOME, 3 CALL, 4 RETURN, 5 THROW, 6 FAILURE
///     6   2  reserved, zero
///     8   8  call id, never 0 (a WELCOME, RETURN, THROW or FAILURE repeats its HELLO's or CALL's)
///     16  …  the body of the kind
///
/// CALL: target length T (u16, 1–1024), substitution count G (u8, ≤ 16), argument count A (u8,
/// ≤ 64), then A arguments (u32 length, value), G substitutions (u16 length 1–1024, mangled
/// type name) and the target identifier. RETURN: the value (empty for Void). THROW: the error's
/// mangled type name (u16 length 1–1024, name), then its value. FAILURE: reason (u8, 1–3), three
/// reserved zero bytes, UTF-8 text (≤ 4096 bytes). Names are printable ASCII (0x21–0x7E).
///
/// `Envelope` is the envelope as a value, for the test vectors and the fuzz target; the call
/// path writes envelopes in place (`EnvelopeWriter`) and reads them without copying
/// (`EnvelopeView`), which this type uses too. Package-visible for the fuzz target under Fuzz/.
package enum Envelope: Equatable, Sendable {
    case hello(callID: UInt64)
    case welcome(callID: UInt64)
    case call(callID: UInt64, target: String, substitutions: [String], arguments: [[UInt8]])
    case returned(callID: UInt64, value: [UInt8])
    case threw(callID: UInt64, errorType: String, value: [UInt8])
    case failed(callID: UInt64, reason: FailureReason, text: String)

    /// The kind byte.
    package enum Kind: UInt8, Sendable {
        case hello = 1, welcome, call, returned, threw, failed
    }

    /// Why a FAILURE was sent: the `PortActorSystemError` case the caller throws.
    package enum FailureReason: UInt8, Sendable {
        case actorNotFound = 1, unknownTarget, remoteCallFailed
    }

    /// "RLKD" read as a little-endian word.
    static let magic: UInt32 = 0x444B_4C52
    static let version: UInt8 = 1
    static let headerSize = 16
    /// The fixed part of a CALL: the header, T, G and A.
    static let callFixedSize = 20
    /// The largest envelope: what the u32 argument lengths can describe. An envelope is one Data
    /// component of its message, which crosses processes in the frame or, above
    /// `MessagePort.inlineDataLimit`, as sealed memory; the receiving port's
    /// `maximumIncomingDataSize` (1 GiB by default) bounds it before this does.
    package static let maximumSize = Int(UInt32.max)
    static let maximumNameLength = 1_024
    static let maximumSubstitutions = 16
    static let maximumArguments = 64
    static let maximumFailureText = 4_096

    /// The envelope's bytes. Throws `.messageTooLarge` beyond `maximumSize`; a name or count out
    /// of its range is a programmer error (a precondition failure naming it).
    package func encoded() throws(PortError) -> Data {
        var writer: EnvelopeWriter
        switch self {
        case .hello(let callID):
            writer = EnvelopeWriter(kind: .hello, callID: callID)
        case .welcome(let callID):
            writer = EnvelopeWriter(kind: .welcome, callID: callID)
        case .call(let callID, let target, let substitutions, let arguments):
            writer = EnvelopeWriter.call()
            for argument in arguments { writer.appendArgument(argument) }
            writer.finishCall(callID: callID, substitutions: substitutions, target: target)
        case .returned(let callID, let value):
            writer = EnvelopeWriter(kind: .returned, callID: callID)
            writer.append(value)
        case .threw(let callID, let errorType, let value):
            writer = EnvelopeWriter(kind: .threw, callID: callID)
            writer.appendName(errorType)
            writer.append(value)
        case .failed(let callID, let reason, let text):
            writer = EnvelopeWriter.failure(callID: callID, reason: reason, text: text)
        }
        return try writer.finished()
    }

    /// Parses and validates an envelope (distributed-envelope.md §4: the first failing check
    /// names the reason).
    package static func decode(_ bytes: some Collection<UInt8>) throws(EnvelopeError) -> Envelope {
        let copy = Array(bytes)
        return try copy.withUnsafeBytes { buffer in Result { () throws(EnvelopeError) -> Envelope in
            let view = try EnvelopeView(validating: buffer)
            func bytes(_ range: Range<Int>) -> [UInt8] { Array(buffer[range]) }
            func text(_ range: Range<Int>) -> String { String(decoding: buffer[range], as: UTF8.self) }
            switch view.kind {
            case .hello: return .hello(callID: view.callID)
            case .welcome: return .welcome(callID: view.callID)
            case .call:
                var cursor = view.arguments
                var arguments: [[UInt8]] = []
                while let argument = cursor.next(in: buffer) { arguments.append(bytes(argument)) }
                return .call(callID: view.callID, target: text(view.target),
                             substitutions: view.substitutionRanges(in: buffer).map(text), arguments: arguments)
            case .returned: return .returned(callID: view.callID, value: bytes(view.value))
            case .threw: return .threw(callID: view.callID, errorType: text(view.errorType), value: bytes(view.value))
            case .failed: return .failed(callID: view.callID, reason: view.reason!, text: text(view.value))
            }
        } }.get()
    }
}

/// Why an envelope was refused (distributed-envelope.md §4). A session that receives one is
/// closed: the peer loses its connection, never its process.
package enum EnvelopeError: String, Error, Equatable, Sendable, CaseIterable {
    /// Fewer bytes than the header, or than a field the envelope declares.
    case truncated
    /// More than `Envelope.maximumSize` bytes.
    case tooLarge
    /// The first four bytes are not "RLKD".
    case badMagic
    /// A version this implementation does not speak.
    case unsupportedVersion
    /// A kind other than 1–6.
    case unknownKind
    /// A reserved byte is not zero.
    case reservedNotZero
    /// A call id of 0.
    case badCallID
    /// A name length outside 1–1024, or a FAILURE text longer than 4096 bytes.
    case badLength
    /// More than 16 substitutions or 64 arguments.
    case badCount
    /// A byte outside 0x21–0x7E in a target or type name.
    case badName
    /// A FAILURE reason other than 1–3.
    case unknownReason
    /// A FAILURE text that is not UTF-8.
    case badText
    /// Bytes after the last field.
    case trailingBytes
}

/// A validated envelope, read in place: offsets into the buffer it was validated from.
package struct EnvelopeView: Sendable {
    package let kind: Envelope.Kind
    package let callID: UInt64
    /// CALL: the target identifier.
    package var target: Range<Int> = 0..<0
    /// CALL: the arguments, in order.
    package var arguments = ArgumentCursor(offset: 0, remaining: 0)
    /// CALL: where the substitutions start, and how many there are.
    var substitutionsStart = 0
    package var substitutionCount = 0
    /// THROW: the error's type name.
    package var errorType: Range<Int> = 0..<0
    /// RETURN and THROW: the value; FAILURE: the text.
    package var value: Range<Int> = 0..<0
    /// FAILURE: the reason.
    package var reason: Envelope.FailureReason?

    /// Validates `bytes` in the order of distributed-envelope.md §4.
    package init(validating bytes: UnsafeRawBufferPointer) throws(EnvelopeError) {
        let count = bytes.count
        guard count >= Envelope.headerSize else { throw .truncated }
        guard count <= Envelope.maximumSize else { throw .tooLarge }
        guard bytes.loadUnaligned(as: UInt32.self).littleEndian == Envelope.magic else { throw .badMagic }
        guard bytes[4] == Envelope.version else { throw .unsupportedVersion }
        guard let kind = Envelope.Kind(rawValue: bytes[5]) else { throw .unknownKind }
        guard bytes[6] == 0, bytes[7] == 0 else { throw .reservedNotZero }
        let callID = UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
        guard callID != 0 else { throw .badCallID }
        self.kind = kind
        self.callID = callID
        var at = Envelope.headerSize
        switch kind {
        case .hello, .welcome:
            break
        case .call:
            guard count >= Envelope.callFixedSize else { throw .truncated }
            let targetLength = Int(bytes.u16(at: 16))
            guard (1...Envelope.maximumNameLength).contains(targetLength) else { throw .badLength }
            let substitutions = Int(bytes[18])
            let argumentCount = Int(bytes[19])
            guard substitutions <= Envelope.maximumSubstitutions, argumentCount <= Envelope.maximumArguments else {
                throw .badCount
            }
            at = Envelope.callFixedSize
            for _ in 0..<argumentCount {
                guard count - at >= 4 else { throw .truncated }
                let length = Int(bytes.u32(at: at))
                guard count - at - 4 >= length else { throw .truncated }
                at += 4 + length
            }
            arguments = ArgumentCursor(offset: Envelope.callFixedSize, remaining: argumentCount)
            substitutionsStart = at
            substitutionCount = substitutions
            for _ in 0..<substitutions {
                at = try Self.name(in: bytes, at: at).upperBound
            }
            guard count - at >= targetLength else { throw .truncated }
            target = at..<(at + targetLength)
            guard Self.isName(bytes[target]) else { throw .badName }
            at = target.upperBound
        case .returned:
            value = at..<count
            at = count
        case .threw:
            errorType = try Self.name(in: bytes, at: at)
            value = errorType.upperBound..<count
            at = count
        case .failed:
            guard count >= Envelope.callFixedSize else { throw .truncated }
            guard let reason = Envelope.FailureReason(rawValue: bytes[16]) else { throw .unknownReason }
            guard bytes[17] == 0, bytes[18] == 0, bytes[19] == 0 else { throw .reservedNotZero }
            guard count - Envelope.callFixedSize <= Envelope.maximumFailureText else { throw .badLength }
            value = Envelope.callFixedSize..<count
            guard String(validating: bytes[value], as: UTF8.self) != nil else { throw .badText }
            self.reason = reason
            at = count
        }
        guard at == count else { throw .trailingBytes }
    }

    /// The validated envelope `data` holds, or why it is refused.
    package static func of(_ data: Data) -> Result<EnvelopeView, EnvelopeError> {
        data.withUnsafeBytes { bytes in Result { () throws(EnvelopeError) in try EnvelopeView(validating: bytes) } }
    }

    /// A length-prefixed name (u16 length, 1–1024 printable ASCII bytes) at `at`: its bytes.
    private static func name(in bytes: UnsafeRawBufferPointer, at: Int) throws(EnvelopeError) -> Range<Int> {
        guard bytes.count - at >= 2 else { throw .truncated }
        let length = Int(bytes.u16(at: at))
        guard (1...Envelope.maximumNameLength).contains(length) else { throw .badLength }
        guard bytes.count - at - 2 >= length else { throw .truncated }
        let name = (at + 2)..<(at + 2 + length)
        guard isName(bytes[name]) else { throw .badName }
        return name
    }

    /// Mangled names and target identifiers are printable ASCII without spaces.
    private static func isName(_ bytes: Slice<UnsafeRawBufferPointer>) -> Bool {
        bytes.allSatisfy { (0x21...0x7E).contains($0) }
    }

    /// CALL: the substitutions' name ranges, in order.
    package func substitutionRanges(in bytes: UnsafeRawBufferPointer) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var at = substitutionsStart
        for _ in 0..<substitutionCount {
            let length = Int(bytes.u16(at: at))
            ranges.append((at + 2)..<(at + 2 + length))
            at += 2 + length
        }
        return ranges
    }
}

/// Walks a validated CALL's arguments in order.
package struct ArgumentCursor: Sendable {
    var offset: Int
    var remaining: Int

    /// The next argument's bytes, nil after the last.
    package mutating func next(in bytes: UnsafeRawBufferPointer) -> Range<Int>? {
        guard remaining > 0 else { return nil }
        remaining -= 1
        let length = Int(bytes.u32(at: offset))
        defer { offset += 4 + length }
        return (offset + 4)..<(offset + 4 + length)
    }
}

extension UnsafeRawBufferPointer {
    @inline(__always)
    func u16(at offset: Int) -> UInt16 { UInt16(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt16.self)) }

    @inline(__always)
    func u32(at offset: Int) -> UInt32 { UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
}

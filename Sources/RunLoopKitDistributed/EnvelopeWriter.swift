import FoundationEssentials
import RunLoopKit

/// Writes an envelope (Protocols/distributed-envelope.md) into the `Data` that is sent as the
/// message's DATA component, in one buffer: a call's arguments are encoded straight into it as
/// they are recorded, then its substitutions and target are appended and the counts patched in.
package struct EnvelopeWriter {
    package private(set) var data: Data
    private var argumentCount = 0

    /// An envelope of `kind` whose body the caller appends.
    package init(kind: Envelope.Kind, callID: UInt64, capacity: Int = 64) {
        data = Data(capacity: capacity)
        appendHeader(kind: kind, callID: callID)
    }

    /// A CALL whose arguments are appended next; `finishCall` completes it.
    package static func call() -> EnvelopeWriter {
        var writer = EnvelopeWriter(kind: .call, callID: 0, capacity: 128)
        // T, G and A, patched by `finishCall`.
        writer.append(UInt32(0))
        return writer
    }

    /// A FAILURE; a text longer than the protocol's 4096 bytes is cut at a character boundary.
    package static func failure(callID: UInt64, reason: Envelope.FailureReason, text: String) -> EnvelopeWriter {
        var writer = EnvelopeWriter(kind: .failed, callID: callID, capacity: Envelope.callFixedSize + text.utf8.count)
        writer.append(UInt32(reason.rawValue))
        let utf8 = text.utf8
        var end = utf8.index(utf8.startIndex, offsetBy: min(utf8.count, Envelope.maximumFailureText))
        while end.samePosition(in: text.unicodeScalars) == nil { end = utf8.index(before: end) }
        writer.data.append(contentsOf: utf8[..<end])
        return writer
    }

    private mutating func appendHeader(kind: Envelope.Kind, callID: UInt64) {
        append(Envelope.magic)
        append(UInt16(Envelope.version) | UInt16(kind.rawValue) << 8)
        append(UInt16(0))
        append(callID)
    }

    /// Appends an integer, little-endian.
    package mutating func append<I: FixedWidthInteger>(_ value: I) {
        withUnsafeBytes(of: value.littleEndian) { data.append(contentsOf: $0) }
    }

    /// Appends what `write` writes (a value's JSON text).
    package mutating func appendEncoded<E: Error>(_ write: (inout Data) throws(E) -> Void) throws(E) {
        try write(&data)
    }

    /// Appends bytes as they are.
    package mutating func append(_ bytes: some Sequence<UInt8>) {
        data.append(contentsOf: bytes)
    }

    /// Appends a length-prefixed name (u16 length, then the bytes).
    package mutating func appendName(_ name: String) {
        let count = name.utf8.count
        precondition((1...Envelope.maximumNameLength).contains(count), """
            distributed call: the type or target name \(name) is \(count) bytes; the envelope \
            carries names of 1–\(Envelope.maximumNameLength) bytes
            """)
        append(UInt16(count))
        data.append(contentsOf: name.utf8)
    }

    /// CALL: one argument whose value bytes `write` appends; its length is patched in after.
    package mutating func appendArgument<E: Error>(_ write: (inout Data) throws(E) -> Void) throws(E) {
        precondition(argumentCount < Envelope.maximumArguments, """
            distributed call: more than \(Envelope.maximumArguments) arguments; a distributed function \
            called through PortActorSystem takes at most \(Envelope.maximumArguments)
            """)
        let lengthAt = data.count
        append(UInt32(0))
        try write(&data)
        // Clamped: an argument past the u32 range makes the envelope too large for `finished()`.
        let length = UInt32(clamping: data.count - lengthAt - 4)
        data.withUnsafeMutableBytes { $0.storeBytes(of: length.littleEndian, toByteOffset: lengthAt, as: UInt32.self) }
        argumentCount += 1
    }

    /// CALL: one argument's encoded value.
    package mutating func appendArgument(_ value: [UInt8]) {
        appendArgument { (data: inout Data) in data.append(contentsOf: value) }
    }

    /// CALL: appends the substitutions and the target and fills in the call id and the counts.
    package mutating func finishCall(callID: UInt64, substitutions: [String], target: String) {
        precondition(substitutions.count <= Envelope.maximumSubstitutions, """
            distributed call: \(substitutions.count) generic substitutions; the envelope carries at most \
            \(Envelope.maximumSubstitutions)
            """)
        for substitution in substitutions { appendName(substitution) }
        let targetLength = target.utf8.count
        precondition((1...Envelope.maximumNameLength).contains(targetLength), """
            distributed call: the target identifier \(target) is \(targetLength) bytes; the envelope \
            carries 1–\(Envelope.maximumNameLength)
            """)
        data.append(contentsOf: target.utf8)
        let counts = UInt32(targetLength) | UInt32(substitutions.count) << 16 | UInt32(argumentCount) << 24
        data.withUnsafeMutableBytes { bytes in
            bytes.storeBytes(of: callID.littleEndian, toByteOffset: 8, as: UInt64.self)
            bytes.storeBytes(of: counts.littleEndian, toByteOffset: 16, as: UInt32.self)
        }
    }

    /// The envelope; throws `.messageTooLarge` beyond `Envelope.maximumSize`.
    package func finished() throws(PortError) -> Data {
        guard data.count <= Envelope.maximumSize else { throw .messageTooLarge(limit: Envelope.maximumSize) }
        return data
    }
}

import FoundationEssentials

/// Arguments, results and thrown errors as JSON texts (RFC 8259), exactly as FoundationEssentials'
/// `JSONEncoder` writes them with its default options (distributed-envelope.md §3): any peer with
/// a JSON library can read and write them. `Int`, `Int64`, `Int32`, `UInt`, `UInt64`, `UInt32`,
/// `Bool` and strings with nothing to escape are written and read here directly — the same
/// bytes, without the encoder's containers (the common case of a call, and most of its cost);
/// everything else goes through `JSONEncoder` and `JSONDecoder`.
struct ValueCoding: Sendable {
    /// Set up once per system and shared by its calls (JSONEncoder is safe to share between threads).
    private let encoder = JSONEncoder()

    /// Appends `value`'s JSON text to `data`. Throws the encoder's `EncodingError`.
    func encode<T: Encodable>(_ value: T, into data: inout Data) throws {
        if T.self == Int.self { return Self.appendDecimal(Int64(unsafeBitCast(value, to: Int.self)), to: &data) }
        if T.self == Int64.self { return Self.appendDecimal(unsafeBitCast(value, to: Int64.self), to: &data) }
        if T.self == Int32.self { return Self.appendDecimal(Int64(unsafeBitCast(value, to: Int32.self)), to: &data) }
        if T.self == UInt32.self { return Self.appendDecimal(Int64(unsafeBitCast(value, to: UInt32.self)), to: &data) }
        if T.self == UInt64.self || T.self == UInt.self {
            let unsigned = unsafeBitCast(value, to: UInt64.self)
            if let signed = Int64(exactly: unsigned) { return Self.appendDecimal(signed, to: &data) }
        }
        if T.self == Bool.self {
            return data.append(contentsOf: unsafeBitCast(value, to: Bool.self) ? Self.trueLiteral : Self.falseLiteral)
        }
        if T.self == String.self {
            var string = unsafeBitCast(value, to: String.self)
            let plain = string.withUTF8 { bytes in
                guard bytes.allSatisfy(Self.needsNoEscape) else { return false }
                data.append(UInt8(ascii: "\""))
                data.append(contentsOf: bytes)
                data.append(UInt8(ascii: "\""))
                return true
            }
            if plain { return }
        }
        data.append(contentsOf: try encoder.encode(value))
    }

    /// Decodes a `T` from the JSON text at `range` (offsets from `data`'s start), resolving
    /// distributed actor references through `system`. Throws `DecodingError`.
    func decode<T: Decodable>(_ type: T.Type, from data: Data, _ range: Range<Int>, system: PortActorSystem) throws -> T {
        let fast: T? = data.withUnsafeBytes { buffer in
            let text = UnsafeRawBufferPointer(rebasing: buffer[range])
            if T.self == Int.self { return Self.decimal(text, in: Int.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == Int64.self { return Self.decimal(text, in: Int64.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == Int32.self { return Self.decimal(text, in: Int32.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == UInt.self { return Self.decimal(text, in: UInt.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == UInt64.self { return Self.decimal(text, in: UInt64.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == UInt32.self { return Self.decimal(text, in: UInt32.self).map { unsafeBitCast($0, to: T.self) } }
            if T.self == Bool.self {
                if text.elementsEqual(Self.trueLiteral) { return unsafeBitCast(true, to: T.self) }
                if text.elementsEqual(Self.falseLiteral) { return unsafeBitCast(false, to: T.self) }
                return nil
            }
            if T.self == String.self { return Self.plainString(text).map { unsafeBitCast($0, to: T.self) } }
            return nil
        }
        if let fast { return fast }
        let start = data.startIndex
        let decoder = JSONDecoder()
        decoder.userInfo[.actorSystemKey] = system
        return try decoder.decode(T.self, from: data[(start + range.lowerBound)..<(start + range.upperBound)])
    }

    private static let trueLiteral = Array("true".utf8)
    private static let falseLiteral = Array("false".utf8)

    /// Bytes JSONEncoder writes as they are inside a string: it escapes `"`, `\`, `/` and the
    /// control characters.
    private static func needsNoEscape(_ byte: UInt8) -> Bool {
        byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") && byte != UInt8(ascii: "/")
    }

    private static func appendDecimal(_ value: Int64, to data: inout Data) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
            var magnitude = value.magnitude
            var at = 20
            repeat {
                at -= 1
                digits[at] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
            } while magnitude != 0
            if value < 0 { data.append(UInt8(ascii: "-")) }
            data.append(UnsafeBufferPointer(rebasing: digits[at...]))
        }
    }

    /// The integer a plain JSON integer literal (`-?(0|[1-9][0-9]*)`) spells, when it fits `I`;
    /// nil for any other text, which JSONDecoder then reads (or refuses) itself.
    private static func decimal<I: FixedWidthInteger>(_ text: UnsafeRawBufferPointer, in: I.Type) -> I? {
        var digits = text[...]
        let negative = digits.first == UInt8(ascii: "-")
        if negative { digits = digits.dropFirst() }
        guard let first = digits.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first),
              first != UInt8(ascii: "0") || digits.count == 1, digits.count <= 20 else { return nil }
        var value: I = 0
        for byte in digits {
            guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
            let digit = I(byte - UInt8(ascii: "0"))
            let (shifted, overflowA) = value.multipliedReportingOverflow(by: 10)
            let (next, overflowB) = negative ? shifted.subtractingReportingOverflow(digit) : shifted.addingReportingOverflow(digit)
            guard !overflowA, !overflowB else { return nil }
            value = next
        }
        return value
    }

    /// The string a JSON string literal without escapes spells; nil for any other text.
    private static func plainString(_ text: UnsafeRawBufferPointer) -> String? {
        guard text.count >= 2, text.first == UInt8(ascii: "\""), text.last == UInt8(ascii: "\"") else { return nil }
        let inner = text[1..<(text.count - 1)]
        guard inner.allSatisfy({ $0 >= 0x20 && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") }) else { return nil }
        return String(validating: inner, as: UTF8.self)
    }
}

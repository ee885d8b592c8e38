/// ASCII case folding for command names and options, which Redis compares with `strcasecmp`.
enum ASCII {
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte
    }

    /// Whether `bytes` spell `word` (given in lowercase), ignoring ASCII case.
    static func equals(_ bytes: UnsafeRawBufferPointer, _ word: StaticString) -> Bool {
        guard bytes.count == word.utf8CodeUnitCount else { return false }
        let letters = word.utf8Start
        for index in 0..<bytes.count where lowercased(bytes[index]) != letters[index] {
            return false
        }
        return true
    }

    /// The bytes as text for a reply (an error message quoting an argument). Redis quotes C
    /// strings, which end at the first NUL byte; bytes that are not UTF-8 pass through as
    /// replacement characters only in this text, never in stored data.
    static func text(_ bytes: UnsafeRawBufferPointer, limit: Int = .max) -> [UInt8] {
        let end = min(bytes.firstIndex(of: 0) ?? bytes.count, limit)
        return Array(bytes[0..<end])
    }
}

/// Glob patterns as CONFIG GET matches them (Redis's `stringmatchlen` without regard to case):
/// `*`, `?`, `[abc]`, `[^a-z]` and `\` escapes.
enum Glob {
    static func matches(_ pattern: UnsafeRawBufferPointer, _ text: [UInt8]) -> Bool {
        match(Array(pattern)[...], text[...])
    }

    private static func match(_ pattern: ArraySlice<UInt8>, _ text: ArraySlice<UInt8>) -> Bool {
        var pattern = pattern, text = text
        while let first = pattern.first {
            switch first {
            case UInt8(ascii: "*"):
                while pattern.first == UInt8(ascii: "*") { pattern = pattern.dropFirst() }
                if pattern.isEmpty { return true }
                while true {
                    if match(pattern, text) { return true }
                    if text.isEmpty { return false }
                    text = text.dropFirst()
                }
            case UInt8(ascii: "?"):
                guard !text.isEmpty else { return false }
                text = text.dropFirst()
                pattern = pattern.dropFirst()
            case UInt8(ascii: "["):
                guard let byte = text.first else { return false }
                pattern = pattern.dropFirst()
                let negated = pattern.first == UInt8(ascii: "^")
                if negated { pattern = pattern.dropFirst() }
                var matched = false
                while let item = pattern.first, item != UInt8(ascii: "]") {
                    pattern = pattern.dropFirst()
                    if item == UInt8(ascii: "\\"), let escaped = pattern.first {
                        pattern = pattern.dropFirst()
                        if ASCII.lowercased(escaped) == ASCII.lowercased(byte) { matched = true }
                    } else if pattern.count >= 2 && pattern.first == UInt8(ascii: "-") {
                        let end = pattern[pattern.startIndex + 1]
                        pattern = pattern.dropFirst(2)
                        let (low, high) = (min(ASCII.lowercased(item), ASCII.lowercased(end)),
                                           max(ASCII.lowercased(item), ASCII.lowercased(end)))
                        if (low...high).contains(ASCII.lowercased(byte)) { matched = true }
                    } else if ASCII.lowercased(item) == ASCII.lowercased(byte) {
                        matched = true
                    }
                }
                pattern = pattern.dropFirst()   // the closing bracket, if any
                guard matched != negated else { return false }
                text = text.dropFirst()
            default:
                var literal = first
                if first == UInt8(ascii: "\\") && pattern.count >= 2 {
                    pattern = pattern.dropFirst()
                    literal = pattern.first!
                }
                guard let byte = text.first, ASCII.lowercased(byte) == ASCII.lowercased(literal) else { return false }
                text = text.dropFirst()
                pattern = pattern.dropFirst()
            }
        }
        return text.isEmpty
    }
}

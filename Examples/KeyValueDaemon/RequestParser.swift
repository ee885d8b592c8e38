#if canImport(Glibc)
import Glibc
#endif

/// Splits a connection's input into commands the way redis-server 7.0 does
/// (`processMultibulkBuffer` and `processInlineBuffer` in its networking.c): RESP multibulk
/// arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`), and inline commands for
/// anything that does not start with `*` (`PING\r\n`, split like `sdssplitargs`, with quotes
/// and escapes). Protocol errors carry Redis's own messages; the connection is then answered
/// and closed, as Redis does.
///
/// The arguments of a multibulk command point into the input (no copy); those of an inline
/// command into the parser's own buffer. Either way they are valid until the next `parse`.
/// Network thread only.
struct RequestParser: ~Copyable {
    /// The longest an inline command, or the line holding a multibulk or bulk count, may grow
    /// while its end has not arrived (Redis's PROTO_INLINE_MAX_SIZE).
    static let lineLimit = 64 * 1024

    enum Outcome {
        /// A command whose arguments are in `arguments`, taking `consumed` bytes.
        case command(consumed: Int)
        /// Bytes that hold no command (`*0`, a negative count, an empty inline line).
        case nothing(consumed: Int)
        /// The command is not all there: at least `needed` bytes (from the start of the input)
        /// must have arrived before parsing it again is worth it.
        case incomplete(needed: Int)
        /// A protocol error: reply with this message and close the connection.
        case protocolError(String)
        /// The command is (or would be, once all there) larger than `maxRequestBytes`, counting
        /// what parsing it holds besides its bytes: close the connection.
        case tooLarge
    }

    /// What the parser holds for each argument besides its bytes (the pointer in `arguments`):
    /// charged against `maxRequestBytes`, so that a header of a hundred million 1-byte
    /// arguments costs what it would cost to parse, not 7 bytes apiece.
    static let argumentOverhead = MemoryLayout<UnsafeRawBufferPointer>.stride
    /// The shortest an argument can be on the wire (`$0\r\n\r\n`).
    static let shortestArgument = 6
    /// Arguments' room kept between commands; more is given back (`releaseMemory()`).
    static let keptArguments = 1024

    /// The largest bulk string accepted (Redis: proto-max-bulk-len, 512 MB).
    let maxBulkLength: Int
    /// The largest command, charged as it parses: its bytes plus `argumentOverhead` per
    /// argument (the daemon's client-query-buffer-limit).
    let maxRequestBytes: Int
    /// The arguments of the last command parsed.
    private(set) var arguments: [UnsafeRawBufferPointer] = []
    /// The unescaped arguments of an inline command.
    private var inlineBytes = ByteBuffer()
    private var inlineEnds: [Int] = []

    init(maxBulkLength: Int, maxRequestBytes: Int) {
        self.maxBulkLength = maxBulkLength
        self.maxRequestBytes = maxRequestBytes
        arguments.reserveCapacity(16)
    }

    /// Gives back the room of a command with many arguments (a parser is shared by every
    /// connection of its thread, and would otherwise keep the largest it ever parsed).
    mutating func releaseMemory() {
        guard arguments.capacity > Self.keptArguments else { return }
        arguments = []
        arguments.reserveCapacity(16)
    }

    /// Whether a command has held more than `keptArguments` arguments since the last
    /// `releaseMemory()`.
    var holdsMemory: Bool { arguments.capacity > Self.keptArguments }

    mutating func parse(_ input: UnsafeRawBufferPointer) -> Outcome {
        guard !input.isEmpty else { return .incomplete(needed: 1) }
        return input[0] == UInt8(ascii: "*") ? parseMultibulk(input) : parseInline(input)
    }

    // MARK: - Multibulk

    private mutating func parseMultibulk(_ input: UnsafeRawBufferPointer) -> Outcome {
        arguments.removeAll(keepingCapacity: true)
        guard let countEnd = Self.index(of: UInt8(ascii: "\r"), in: input, from: 0) else {
            return input.count > Self.lineLimit
                ? .protocolError("Protocol error: too big mbulk count string") : .incomplete(needed: input.count + 1)
        }
        // The byte after \r (\n, not checked, as Redis does not) must be there too.
        guard countEnd + 2 <= input.count else { return .incomplete(needed: countEnd + 2) }
        guard let count = RedisInteger.parse(UnsafeRawBufferPointer(rebasing: input[1..<countEnd])),
              count <= Int64(Int32.max) else {
            return .protocolError("Protocol error: invalid multibulk length")
        }
        var position = countEnd + 2
        guard count > 0 else { return .nothing(consumed: position) }
        // A command that cannot fit even with its shortest arguments is cut at its header,
        // before anything is read or held for it.
        let cheapest = Self.shortestArgument + Self.argumentOverhead
        guard Int(count) <= (maxRequestBytes - position) / cheapest else { return .tooLarge }
        for index in 0..<Int(count) {
            // The shortest the arguments after this one can be: whatever is missing, parsing
            // again is not worth it before they could be there (a command of many small
            // arguments is then parsed a few times as it arrives, not once per read).
            let rest = (Int(count) - index - 1) * Self.shortestArgument
            guard position + arguments.count * Self.argumentOverhead <= maxRequestBytes else { return .tooLarge }
            guard let lengthEnd = Self.index(of: UInt8(ascii: "\r"), in: input, from: position) else {
                return input.count - position > Self.lineLimit
                    ? .protocolError("Protocol error: too big bulk count string") : .incomplete(needed: input.count + 1 + rest)
            }
            guard lengthEnd + 2 <= input.count else { return .incomplete(needed: lengthEnd + 2 + rest) }
            guard input[position] == UInt8(ascii: "$") else {
                return .protocolError("Protocol error: expected '$', got '\(Self.printable(input[position]))'")
            }
            guard let length = RedisInteger.parse(UnsafeRawBufferPointer(rebasing: input[(position + 1)..<lengthEnd])),
                  length >= 0, length <= Int64(maxBulkLength) else {
                return .protocolError("Protocol error: invalid bulk length")
            }
            position = lengthEnd + 2
            let bulkEnd = position + Int(length)
            // The two bytes after the bulk (\r\n) are skipped unread, as Redis does.
            guard bulkEnd + 2 <= input.count else { return .incomplete(needed: bulkEnd + 2 + rest) }
            arguments.append(UnsafeRawBufferPointer(rebasing: input[position..<bulkEnd]))
            position = bulkEnd + 2
        }
        guard position + arguments.count * Self.argumentOverhead <= maxRequestBytes else { return .tooLarge }
        return .command(consumed: position)
    }

    /// A byte in an error reply: Redis prints it with `%c` and then turns CR and LF into spaces.
    private static func printable(_ byte: UInt8) -> String {
        byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") ? " " : String(decoding: [byte], as: UTF8.self)
    }

    private static func index(of byte: UInt8, in input: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard start < input.count else { return nil }
        guard let found = memchr(input.baseAddress! + start, Int32(byte), input.count - start) else { return nil }
        return UnsafeRawPointer(found) - input.baseAddress!
    }

    // MARK: - Inline

    private mutating func parseInline(_ input: UnsafeRawBufferPointer) -> Outcome {
        arguments.removeAll(keepingCapacity: true)
        guard let newline = Self.index(of: UInt8(ascii: "\n"), in: input, from: 0) else {
            return input.count > Self.lineLimit
                ? .protocolError("Protocol error: too big inline request") : .incomplete(needed: input.count + 1)
        }
        var lineEnd = newline
        if lineEnd > 0 && input[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
        guard split(UnsafeRawBufferPointer(rebasing: input[0..<lineEnd])) else {
            return .protocolError("Protocol error: unbalanced quotes in request")
        }
        return arguments.isEmpty ? .nothing(consumed: newline + 1) : .command(consumed: newline + 1)
    }

    /// `sdssplitargs`: words separated by blanks; "double quotes" with \n \r \t \b \a \xHH and
    /// \<any> escapes, 'single quotes' with \' only; a closing quote must be followed by a
    /// blank or the end. The line ends at its first NUL byte, as the C string Redis splits
    /// does. False for unbalanced quotes.
    private mutating func split(_ line: UnsafeRawBufferPointer) -> Bool {
        inlineBytes.removeAll(keeping: 64 * 1024)
        inlineEnds.removeAll(keepingCapacity: true)
        let end = line.firstIndex(of: 0) ?? line.count
        func at(_ index: Int) -> UInt8 { index < end ? line[index] : 0 }
        func isSpace(_ byte: UInt8) -> Bool { byte == 32 || (byte >= 9 && byte <= 13) }
        var position = 0
        while true {
            while position < end && isSpace(line[position]) { position += 1 }
            guard position < end else { break }
            var inDouble = false, inSingle = false, done = false
            while !done {
                let byte = at(position)
                if inDouble {
                    if byte == UInt8(ascii: "\\") && at(position + 1) == UInt8(ascii: "x"),
                       let high = Self.hexValue(at(position + 2)), let low = Self.hexValue(at(position + 3)) {
                        inlineBytes.append(high * 16 + low)
                        position += 3
                    } else if byte == UInt8(ascii: "\\") && at(position + 1) != 0 {
                        position += 1
                        switch at(position) {
                        case UInt8(ascii: "n"): inlineBytes.append(10)
                        case UInt8(ascii: "r"): inlineBytes.append(13)
                        case UInt8(ascii: "t"): inlineBytes.append(9)
                        case UInt8(ascii: "b"): inlineBytes.append(8)
                        case UInt8(ascii: "a"): inlineBytes.append(7)
                        case let other: inlineBytes.append(other)
                        }
                    } else if byte == UInt8(ascii: "\"") {
                        if at(position + 1) != 0 && !isSpace(at(position + 1)) { return false }
                        done = true
                    } else if byte == 0 {
                        return false
                    } else {
                        inlineBytes.append(byte)
                    }
                } else if inSingle {
                    if byte == UInt8(ascii: "\\") && at(position + 1) == UInt8(ascii: "'") {
                        position += 1
                        inlineBytes.append(UInt8(ascii: "'"))
                    } else if byte == UInt8(ascii: "'") {
                        if at(position + 1) != 0 && !isSpace(at(position + 1)) { return false }
                        done = true
                    } else if byte == 0 {
                        return false
                    } else {
                        inlineBytes.append(byte)
                    }
                } else {
                    switch byte {
                    case 32, 10, 13, 9, 0: done = true
                    case UInt8(ascii: "\""): inDouble = true
                    case UInt8(ascii: "'"): inSingle = true
                    default: inlineBytes.append(byte)
                    }
                }
                if at(position) != 0 { position += 1 }
            }
            inlineEnds.append(inlineBytes.count)
        }
        // The words are appended to one buffer, which may move while it grows: point into it
        // only once it is complete.
        let bytes = inlineBytes.bytes
        var start = 0
        for wordEnd in inlineEnds {
            arguments.append(UnsafeRawBufferPointer(rebasing: bytes[start..<wordEnd]))
            start = wordEnd
        }
        return true
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

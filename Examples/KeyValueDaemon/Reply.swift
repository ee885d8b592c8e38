/// RESP2 replies, written as redis-server 7.0 writes them (`addReply*` in its networking.c).
extension ByteBuffer {
    /// `+OK`, `+PONG`: a simple string.
    mutating func appendSimple(_ text: StaticString) {
        append(UInt8(ascii: "+"))
        append(text)
        appendLineEnd()
    }

    mutating func appendInteger(_ value: Int64) {
        append(UInt8(ascii: ":"))
        append(decimal: value)
        appendLineEnd()
    }

    mutating func appendBulk(_ bytes: UnsafeRawBufferPointer) {
        append(UInt8(ascii: "$"))
        append(decimal: Int64(bytes.count))
        appendLineEnd()
        append(bytes)
        appendLineEnd()
    }

    mutating func appendBulk(_ text: String) {
        var text = text
        text.withUTF8 { appendBulk(UnsafeRawBufferPointer($0)) }
    }

    /// The RESP2 null bulk string, `$-1`.
    mutating func appendNull() {
        append("$-1\r\n" as StaticString)
    }

    mutating func appendArrayHeader(_ count: Int) {
        append(UInt8(ascii: "*"))
        append(decimal: Int64(count))
        appendLineEnd()
    }

    /// An error reply. As in Redis (`addReplyErrorLength`), a message that does not start with
    /// `-` gets the `-ERR ` prefix, and one that does carries its own code (`-NOPROTO …`);
    /// CR and LF in the message (which may quote a client's bytes) become spaces, so the reply
    /// stays one line.
    mutating func appendError(_ message: [UInt8]) {
        if message.first != UInt8(ascii: "-") { append("-ERR " as StaticString) }
        for byte in message {
            append(byte == UInt8(ascii: "\r") || byte == UInt8(ascii: "\n") ? UInt8(ascii: " ") : byte)
        }
        appendLineEnd()
    }

    mutating func appendError(_ message: String) {
        appendError(Array(message.utf8))
    }

    /// Redis's `shared.syntaxerr`.
    mutating func appendSyntaxError() {
        append("-ERR syntax error\r\n" as StaticString)
    }

    /// Redis's `shared.outofrangeerr`, for an argument or stored value that is not an integer.
    mutating func appendNotAnInteger() {
        append("-ERR value is not an integer or out of range\r\n" as StaticString)
    }

    /// `wrong number of arguments for '<name>' command` (Redis's `addReplyErrorArity`).
    mutating func appendArityError(_ name: String) {
        appendError("wrong number of arguments for '\(name)' command")
    }

    private mutating func appendLineEnd() {
        append("\r\n" as StaticString)
    }
}

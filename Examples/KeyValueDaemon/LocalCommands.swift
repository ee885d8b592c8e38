/// The commands the network thread answers itself, with no shard: PING, ECHO, QUIT, and as
/// much of COMMAND, CONFIG GET, HELLO and CLIENT as redis-cli and redis-benchmark use. Also
/// the errors Redis gives before running any command (unknown command, unknown subcommand,
/// wrong number of arguments), so that they read exactly as redis-server's.
struct LocalCommands {
    /// What CONFIG GET reports: what redis-benchmark asks for (`save`, `appendonly`, to warn
    /// about persistence it would measure) and the daemon's own limits under Redis's names.
    let settings: [(name: String, value: String)]

    /// Error for a name that is no command (`commandCheckExistence`): arguments quoted up to
    /// 128 bytes in all, each as the C string Redis prints (to its first NUL).
    static func unknownCommand(_ arguments: [UnsafeRawBufferPointer]) -> [UInt8] {
        var quoted: [UInt8] = []
        var index = 1
        while index < arguments.count && quoted.count < 128 {
            quoted += [UInt8(ascii: "'")] + ASCII.text(arguments[index], limit: 128 - quoted.count) + Array("' ".utf8)
            index += 1
        }
        return Array("unknown command '".utf8) + ASCII.text(arguments[0], limit: 128)
            + Array("', with args beginning with: ".utf8) + quoted
    }

    /// Error for a container command (COMMAND, CONFIG, CLIENT) given a subcommand it does not have.
    static func unknownSubcommand(_ arguments: [UnsafeRawBufferPointer]) -> [UInt8] {
        let container = ASCII.text(arguments[0]).map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 }
        return Array("unknown subcommand '".utf8) + ASCII.text(arguments[1], limit: 128)
            + Array("'. Try ".utf8) + container + Array(" HELP.".utf8)
    }

    /// Answers `command` (a local one, whose arity was checked) for `connection`. QUIT also marks
    /// the connection closing.
    func answer(_ command: Command, _ arguments: [UnsafeRawBufferPointer], connection: Connection,
                into reply: inout ByteBuffer) {
        switch command {
        case .ping:
            if arguments.count > 2 { return reply.appendArityError("ping") }
            if arguments.count == 1 { reply.appendSimple("PONG") } else { reply.appendBulk(arguments[1]) }
        case .echo:
            reply.appendBulk(arguments[1])
        case .quit:
            reply.appendSimple("OK")
            connection.closing = true
        case .hello:
            hello(arguments, connection: connection, into: &reply)
        case .command:
            commandCommand(arguments, into: &reply)
        case .config:
            config(arguments, into: &reply)
        case .client:
            client(arguments, connection: connection, into: &reply)
        default:
            preconditionFailure("kv-daemon: \(command.name) runs on a shard")
        }
    }

    // MARK: - HELLO

    /// `helloCommand`, for RESP2 only: HELLO 3 is refused as an unsupported version (kv-daemon
    /// speaks RESP2). AUTH accepts the `default` user with any password, as a Redis without
    /// ACLs or requirepass does.
    private func hello(_ arguments: [UnsafeRawBufferPointer], connection: Connection, into reply: inout ByteBuffer) {
        var next = 1
        if arguments.count >= 2 {
            guard let version = RedisInteger.parse(arguments[1]) else {
                return reply.appendError("Protocol version is not an integer or out of range")
            }
            guard version == 2 else { return reply.appendError("-NOPROTO unsupported protocol version") }
            next = 2
        }
        var newName: [UInt8]??
        while next < arguments.count {
            let more = arguments.count - 1 - next
            if ASCII.equals(arguments[next], "auth") && more >= 2 {
                guard arguments[next + 1].elementsEqual("default".utf8) else {
                    return reply.appendError("-WRONGPASS invalid username-password pair or user is disabled.")
                }
                next += 3
            } else if ASCII.equals(arguments[next], "setname") && more >= 1 {
                guard let name = Self.clientName(arguments[next + 1]) else { return reply.appendError(Self.badName) }
                newName = .some(name)
                next += 2
            } else {
                return reply.appendError(Array("Syntax error in HELLO option '".utf8) + ASCII.text(arguments[next])
                                         + [UInt8(ascii: "'")])
            }
        }
        if let newName { connection.name = newName }
        reply.appendArrayHeader(14)
        for (key, value) in [("server", "kv-daemon"), ("version", "7.0.15"), ("proto", nil), ("id", nil),
                             ("mode", "standalone"), ("role", "master"), ("modules", nil)] {
            reply.appendBulk(key)
            switch key {
            case "proto": reply.appendInteger(2)
            case "id": reply.appendInteger(connection.id)
            case "modules": reply.appendArrayHeader(0)
            default: reply.appendBulk(value!)
            }
        }
    }

    // MARK: - CLIENT

    private static let badName = "Client names cannot contain spaces, newlines or special characters."

    /// A valid name (`clientSetName`): printable ASCII without spaces; empty clears it (nil).
    private static func clientName(_ bytes: UnsafeRawBufferPointer) -> [UInt8]?? {
        guard !bytes.isEmpty else { return .some(nil) }
        guard bytes.allSatisfy({ $0 >= UInt8(ascii: "!") && $0 <= UInt8(ascii: "~") }) else { return nil }
        return .some(Array(bytes))
    }

    private func client(_ arguments: [UnsafeRawBufferPointer], connection: Connection, into reply: inout ByteBuffer) {
        let sub = arguments[1]
        if ASCII.equals(sub, "setname") {
            guard arguments.count == 3 else { return reply.appendArityError("client|setname") }
            guard let name = Self.clientName(arguments[2]) else { return reply.appendError(Self.badName) }
            connection.name = name
            reply.appendSimple("OK")
        } else if ASCII.equals(sub, "getname") {
            guard arguments.count == 2 else { return reply.appendArityError("client|getname") }
            if let name = connection.name { name.withUnsafeBytes { reply.appendBulk($0) } } else { reply.appendNull() }
        } else if ASCII.equals(sub, "id") {
            guard arguments.count == 2 else { return reply.appendArityError("client|id") }
            reply.appendInteger(connection.id)
        } else if ASCII.equals(sub, "help") {
            guard arguments.count == 2 else { return reply.appendArityError("client|help") }
            Self.help("CLIENT", ["GETNAME", "    Return the name of the current connection.",
                                 "ID", "    Return the ID of the current connection.",
                                 "SETNAME <name>", "    Assign the name <name> to the current connection."], into: &reply)
        } else {
            reply.appendError(Self.unknownSubcommand(arguments))
        }
    }

    // MARK: - CONFIG

    private func config(_ arguments: [UnsafeRawBufferPointer], into reply: inout ByteBuffer) {
        let sub = arguments[1]
        if ASCII.equals(sub, "get") {
            guard arguments.count >= 3 else { return reply.appendArityError("config|get") }
            // As Redis: an exact name is reported as the client spelt it, a pattern by the
            // setting's own name; each setting once.
            var matches: [(name: [UInt8], value: String)] = []
            var taken = Set<String>()
            for pattern in arguments.dropFirst(2) {
                let isPattern = pattern.contains { $0 == UInt8(ascii: "*") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "[") }
                for setting in settings where !taken.contains(setting.name) {
                    let name = Array(setting.name.utf8)
                    let matched = isPattern ? Glob.matches(pattern, name) : pattern.elementsEqual(name, by: { ASCII.lowercased($0) == $1 })
                    if matched {
                        taken.insert(setting.name)
                        matches.append((isPattern ? name : Array(pattern), setting.value))
                    }
                }
            }
            reply.appendArrayHeader(matches.count * 2)
            for (name, value) in matches {
                name.withUnsafeBytes { reply.appendBulk($0) }
                reply.appendBulk(value)
            }
        } else if ASCII.equals(sub, "help") {
            guard arguments.count == 2 else { return reply.appendArityError("config|help") }
            Self.help("CONFIG", ["GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values."],
                      into: &reply)
        } else {
            reply.appendError(Self.unknownSubcommand(arguments))
        }
    }

    // MARK: - COMMAND

    private func commandCommand(_ arguments: [UnsafeRawBufferPointer], into reply: inout ByteBuffer) {
        guard arguments.count >= 2 else {
            reply.appendArrayHeader(Command.allCases.count)
            for command in Command.allCases { Self.info(command, into: &reply) }
            return
        }
        let sub = arguments[1]
        if ASCII.equals(sub, "count") {
            guard arguments.count == 2 else { return reply.appendArityError("command|count") }
            reply.appendInteger(Int64(Command.allCases.count))
        } else if ASCII.equals(sub, "info") {
            let asked = arguments.count == 2 ? Command.allCases.map(Optional.some) : arguments.dropFirst(2).map(Command.named)
            reply.appendArrayHeader(asked.count)
            for command in asked {
                if let command { Self.info(command, into: &reply) } else { reply.appendNull() }
            }
        } else if ASCII.equals(sub, "docs") {
            // What redis-cli reads for its help: summary, since and group of each command.
            let asked = arguments.count == 2 ? Command.allCases : arguments.dropFirst(2).compactMap(Command.named)
            reply.appendArrayHeader(asked.count * 2)
            for command in asked {
                reply.appendBulk(command.name)
                reply.appendArrayHeader(6)
                for field in ["summary", command.summary, "since", "1.0.0", "group", command.group] {
                    reply.appendBulk(field)
                }
            }
        } else if ASCII.equals(sub, "help") {
            guard arguments.count == 2 else { return reply.appendArityError("command|help") }
            Self.help("COMMAND", ["(no subcommand)", "    Return details about all commands.",
                                  "COUNT", "    Return the total number of commands.",
                                  "DOCS [<command-name> ...]", "    Return documentary information about commands.",
                                  "INFO [<command-name> ...]", "    Return details about the given commands."],
                      into: &reply)
        } else {
            reply.appendError(Self.unknownSubcommand(arguments))
        }
    }

    /// One `COMMAND` entry in Redis 7.0's shape (name, arity, flags, first key, last key, step,
    /// ACL categories, tips, key specifications, subcommands), the last three left empty.
    private static func info(_ command: Command, into reply: inout ByteBuffer) {
        reply.appendArrayHeader(10)
        reply.appendBulk(command.name)
        reply.appendInteger(Int64(command.arity))
        reply.appendArrayHeader(command.flags.count)
        for flag in command.flags { reply.appendSimpleText(flag) }
        let keys = command.keyPositions
        reply.appendInteger(Int64(keys.first))
        reply.appendInteger(Int64(keys.last))
        reply.appendInteger(Int64(keys.step))
        reply.appendArrayHeader(command.aclCategories.count)
        for category in command.aclCategories { reply.appendSimpleText(category) }
        for _ in 0..<3 { reply.appendArrayHeader(0) }
    }

    /// A HELP reply: a header line, the entries, and the line every Redis HELP ends with.
    private static func help(_ container: String, _ lines: [String], into reply: inout ByteBuffer) {
        let all = ["\(container) <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"] + lines + ["HELP", "    Print this help."]
        reply.appendArrayHeader(all.count)
        for line in all { reply.appendSimpleText(line) }
    }
}

extension ByteBuffer {
    /// A simple string from run-time text (flags, categories, help lines: never CR or LF).
    mutating func appendSimpleText(_ text: String) {
        append(UInt8(ascii: "+"))
        append(text)
        append("\r\n" as StaticString)
    }
}

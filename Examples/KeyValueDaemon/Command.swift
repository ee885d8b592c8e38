/// The commands kv-daemon serves, with Redis 7.0's arity for each (positive: exactly that many
/// arguments, the name included; negative: at least that many) and where each runs: on the
/// shard that owns its key, on the shards that own its keys, on every shard, or on the network
/// thread itself.
enum Command: UInt8, CaseIterable {
    case get, set, del, exists, incr, decr, incrby, mget, mset, expire, pexpire, ttl, pttl, dbsize, flushall
    case ping, echo, quit, command, config, hello, client

    /// Where a command is carried out.
    enum Route {
        /// One key, `arguments[1]`: its shard runs it whole.
        case oneKey
        /// Keys from `arguments[1]` on, every `stride`-th (MSET: key, value, key, value): each
        /// shard runs the part of the command with its keys, and the network thread merges.
        case keys(stride: Int)
        /// Every shard runs it; the network thread merges (DBSIZE, FLUSHALL).
        case everyShard
        /// The network thread answers.
        case local
    }

    var name: String {
        switch self {
        case .get: "get"
        case .set: "set"
        case .del: "del"
        case .exists: "exists"
        case .incr: "incr"
        case .decr: "decr"
        case .incrby: "incrby"
        case .mget: "mget"
        case .mset: "mset"
        case .expire: "expire"
        case .pexpire: "pexpire"
        case .ttl: "ttl"
        case .pttl: "pttl"
        case .dbsize: "dbsize"
        case .flushall: "flushall"
        case .ping: "ping"
        case .echo: "echo"
        case .quit: "quit"
        case .command: "command"
        case .config: "config"
        case .hello: "hello"
        case .client: "client"
        }
    }

    var arity: Int {
        switch self {
        case .get, .incr, .decr, .ttl, .pttl, .echo: 2
        case .incrby: 3
        case .set, .mset, .expire, .pexpire: -3
        case .del, .exists, .mget, .config, .client: -2
        case .dbsize: 1
        case .flushall, .ping, .quit, .command, .hello: -1
        }
    }

    var route: Route {
        switch self {
        case .get, .set, .incr, .decr, .incrby, .expire, .pexpire, .ttl, .pttl: .oneKey
        case .del, .exists, .mget: .keys(stride: 1)
        case .mset: .keys(stride: 2)
        case .dbsize, .flushall: .everyShard
        case .ping, .echo, .quit, .command, .config, .hello, .client: .local
        }
    }

    /// Redis 7.0's flags, for `COMMAND` and `COMMAND INFO`.
    var flags: [String] {
        switch self {
        case .get, .mget, .exists, .ttl, .pttl, .dbsize: ["readonly", "fast"]
        case .set, .mset: ["write", "denyoom"]
        case .incr, .decr, .incrby: ["write", "denyoom", "fast"]
        case .del, .flushall: ["write"]
        case .expire, .pexpire: ["write", "fast"]
        case .ping: ["fast"]
        case .echo: ["loading", "stale", "fast"]
        case .quit, .hello: ["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"]
        case .command: ["loading", "stale"]
        case .config, .client: []
        }
    }

    /// Redis 7.0's ACL categories, for `COMMAND` and `COMMAND INFO`.
    var aclCategories: [String] {
        switch self {
        case .get, .mget: ["@read", "@string", "@fast"]
        case .set, .mset: ["@write", "@string", "@slow"]
        case .incr, .decr, .incrby: ["@write", "@string", "@fast"]
        case .del: ["@keyspace", "@write", "@slow"]
        case .exists, .ttl, .pttl, .dbsize: ["@keyspace", "@read", "@fast"]
        case .expire, .pexpire: ["@keyspace", "@write", "@fast"]
        case .flushall: ["@keyspace", "@write", "@slow", "@dangerous"]
        case .ping, .echo: ["@fast", "@connection"]
        case .quit, .hello: ["@fast", "@connection"]
        case .command: ["@slow", "@connection"]
        case .config, .client: ["@slow"]
        }
    }

    /// First key, last key (-1: the last argument) and step, as `COMMAND` reports them.
    var keyPositions: (first: Int, last: Int, step: Int) {
        switch route {
        case .oneKey: (1, 1, 1)
        case .keys(let stride): (1, -1, stride)
        case .everyShard, .local: (0, 0, 0)
        }
    }

    /// A one-line description, for `COMMAND DOCS` (what redis-cli shows as help).
    var summary: String {
        switch self {
        case .get: "Get the value of a key"
        case .set: "Set the string value of a key"
        case .del: "Delete a key"
        case .exists: "Determine if a key exists"
        case .incr: "Increment the integer value of a key by one"
        case .decr: "Decrement the integer value of a key by one"
        case .incrby: "Increment the integer value of a key by the given amount"
        case .mget: "Get the values of all the given keys"
        case .mset: "Set multiple keys to multiple values"
        case .expire: "Set a key's time to live in seconds"
        case .pexpire: "Set a key's time to live in milliseconds"
        case .ttl: "Get the time to live for a key in seconds"
        case .pttl: "Get the time to live for a key in milliseconds"
        case .dbsize: "Return the number of keys in the selected database"
        case .flushall: "Remove all keys from all databases"
        case .ping: "Ping the server"
        case .echo: "Echo the given string"
        case .quit: "Close the connection"
        case .command: "Get array of Redis command details"
        case .config: "A container for server configuration commands"
        case .hello: "Handshake with Redis"
        case .client: "A container for client connection commands"
        }
    }

    /// The command group, for `COMMAND DOCS`.
    var group: String {
        switch self {
        case .get, .set, .incr, .decr, .incrby, .mget, .mset: "string"
        case .del, .exists, .expire, .pexpire, .ttl, .pttl: "generic"
        case .dbsize, .flushall, .command, .config: "server"
        case .ping, .echo, .quit, .hello, .client: "connection"
        }
    }

    /// Whether `count` arguments (the name included) satisfy the arity.
    func accepts(argumentCount count: Int) -> Bool {
        arity > 0 ? count == arity : count >= -arity
    }

    /// The command named by `name`, compared without regard to ASCII case. Every name is at
    /// most 8 bytes, so the lookup folds the name into one integer and compares it with the
    /// commands' (and then the length, which the folding loses for names holding NUL bytes): a
    /// few dozen instructions, a third of what hashing the name for a dictionary cost.
    static func named(_ name: UnsafeRawBufferPointer) -> Command? {
        guard let key = folded(name) else { return nil }
        for (candidate, command) in foldedNames where candidate == key {
            return command.name.utf8.count == name.count ? command : nil
        }
        return nil
    }

    /// The name's bytes, ASCII letters lowercased, packed into an integer; nil past 8 bytes.
    static func folded(_ name: UnsafeRawBufferPointer) -> UInt64? {
        guard !name.isEmpty, name.count <= 8 else { return nil }
        var packed: UInt64 = 0
        for index in 0..<name.count {
            packed |= UInt64(ASCII.lowercased(name[index])) << (8 * UInt64(index))
        }
        return packed
    }

    /// Every command's folded name, in declaration order (the busiest first).
    private static let foldedNames: [(UInt64, Command)] = Command.allCases.map { command in
        var name = command.name
        return (name.withUTF8 { folded(UnsafeRawBufferPointer($0))! }, command)
    }
}

/// The key commands, run by the shard that owns the keys, with the replies and errors of
/// redis-server 7.0 (its t_string.c, db.c and expire.c), in the same order of checks, so that
/// a client sees the same reply for the same request. `arguments` excludes the command name
/// (`arguments[0]` is Redis's `argv[1]`); `now` is the time of the batch, in Unix milliseconds.
///
/// A part (`isPart`) is this shard's share of a command whose keys live on several shards:
/// MGET's part is its values without the array header, DEL's and EXISTS' a count, MSET's
/// `+OK`; the network thread merges the parts into Redis's reply.
extension Keyspace {
    mutating func execute(_ command: Command, _ arguments: [UnsafeRawBufferPointer], isPart: Bool,
                          now: Int64, into reply: inout ByteBuffer) {
        switch command {
        case .get:
            get(arguments[0], now: now, into: &reply)
        case .set:
            set(arguments, now: now, into: &reply)
        case .incr:
            incrementBy(1, arguments[0], now: now, into: &reply)
        case .decr:
            incrementBy(-1, arguments[0], now: now, into: &reply)
        case .incrby:
            guard let increment = RedisInteger.parse(arguments[1]) else { return reply.appendNotAnInteger() }
            incrementBy(increment, arguments[0], now: now, into: &reply)
        case .del:
            var removed: Int64 = 0
            for key in arguments {
                if let index = lookup(key, now: now) {
                    remove(at: index)
                    removed += 1
                }
            }
            reply.appendInteger(removed)
        case .exists:
            var found: Int64 = 0
            for key in arguments where lookup(key, now: now) != nil { found += 1 }
            reply.appendInteger(found)
        case .mget:
            if !isPart { reply.appendArrayHeader(arguments.count) }
            for key in arguments { get(key, now: now, into: &reply) }
        case .mset:
            var pair = 0
            while pair + 1 < arguments.count {
                set(arguments[pair], value: arguments[pair + 1], now: now)
                pair += 2
            }
            reply.appendSimple("OK")
        case .expire:
            expire(arguments, unitMilliseconds: 1000, name: "expire", now: now, into: &reply)
        case .pexpire:
            expire(arguments, unitMilliseconds: 1, name: "pexpire", now: now, into: &reply)
        case .ttl, .pttl:
            guard let index = lookup(arguments[0], now: now) else { return reply.appendInteger(-2) }
            let deadline = expiresAt(index)
            guard deadline != 0 else { return reply.appendInteger(-1) }
            let left = max(deadline - now, 0)
            reply.appendInteger(command == .pttl ? left : (left + 500) / 1000)
        case .dbsize:
            reply.appendInteger(Int64(count))
        case .flushall:
            removeAll()
            reply.appendSimple("OK")
        case .ping, .echo, .quit, .command, .config, .hello, .client:
            preconditionFailure("kv-daemon: \(command.name) is answered by the network thread, not sent to a shard")
        }
    }

    private mutating func get(_ key: UnsafeRawBufferPointer, now: Int64, into reply: inout ByteBuffer) {
        guard let index = lookup(key, now: now) else { return reply.appendNull() }
        withValue(at: index) { reply.appendBulk($0) }
    }

    /// INCR, DECR, INCRBY (`incrDecrCommand`): a new key starts at 0; the deadline is kept.
    private mutating func incrementBy(_ increment: Int64, _ key: UnsafeRawBufferPointer, now: Int64,
                                      into reply: inout ByteBuffer) {
        let index = lookup(key, now: now)
        var value: Int64 = 0
        if let index {
            guard let stored = withValue(at: index, RedisInteger.parse) else { return reply.appendNotAnInteger() }
            value = stored
        }
        if (increment < 0 && value < 0 && increment < Int64.min - value)
            || (increment > 0 && value > 0 && increment > Int64.max - value) {
            return reply.appendError("increment or decrement would overflow")
        }
        value += increment
        var digits = ByteBuffer(capacity: 24)
        digits.append(decimal: value)
        if let index {
            replace(at: index, with: digits.bytes, keepingDeadline: true)
        } else {
            insert(key, value: digits.bytes)
        }
        reply.appendInteger(value)
    }

    // MARK: - SET

    /// SET's options as Redis 7.0 parses them (`parseExtendedStringArgumentsOrReply`): each
    /// flag refuses the ones it conflicts with, a repeated EX/PX takes the later value.
    private struct SetOptions {
        var ifAbsent = false, ifPresent = false, returnOld = false, keepDeadline = false
        /// EX, PX, EXAT or PXAT, and its argument.
        var expiry: (unit: Unit, argument: UnsafeRawBufferPointer)?
        enum Unit { case seconds, milliseconds, unixSeconds, unixMilliseconds }
    }

    private mutating func set(_ arguments: [UnsafeRawBufferPointer], now: Int64, into reply: inout ByteBuffer) {
        var options = SetOptions()
        var index = 2
        while index < arguments.count {
            let option = arguments[index]
            let next: UnsafeRawBufferPointer? = index + 1 < arguments.count ? arguments[index + 1] : nil
            let unit = options.expiry?.unit
            if ASCII.equals(option, "nx") && !options.ifPresent {
                options.ifAbsent = true
            } else if ASCII.equals(option, "xx") && !options.ifAbsent {
                options.ifPresent = true
            } else if ASCII.equals(option, "get") {
                options.returnOld = true
            } else if ASCII.equals(option, "keepttl") && unit == nil {
                options.keepDeadline = true
            } else if ASCII.equals(option, "ex"), !options.keepDeadline, unit == nil || unit == .seconds, let next {
                options.expiry = (.seconds, next)
                index += 1
            } else if ASCII.equals(option, "px"), !options.keepDeadline, unit == nil || unit == .milliseconds, let next {
                options.expiry = (.milliseconds, next)
                index += 1
            } else if ASCII.equals(option, "exat"), !options.keepDeadline, unit == nil || unit == .unixSeconds, let next {
                options.expiry = (.unixSeconds, next)
                index += 1
            } else if ASCII.equals(option, "pxat"), !options.keepDeadline,
                      unit == nil || unit == .unixMilliseconds, let next {
                options.expiry = (.unixMilliseconds, next)
                index += 1
            } else {
                return reply.appendSyntaxError()
            }
            index += 1
        }

        var deadline: Int64?
        if let (unit, argument) = options.expiry {
            guard var milliseconds = RedisInteger.parse(argument) else { return reply.appendNotAnInteger() }
            let inSeconds = unit == .seconds || unit == .unixSeconds
            if milliseconds <= 0 || (inSeconds && milliseconds > Int64.max / 1000) {
                return reply.appendError("invalid expire time in 'set' command")
            }
            if inSeconds { milliseconds *= 1000 }
            // Redis adds in C, where an overflow wraps to a negative time that it then refuses.
            if unit == .seconds || unit == .milliseconds { milliseconds = milliseconds &+ now }
            if milliseconds <= 0 { return reply.appendError("invalid expire time in 'set' command") }
            deadline = milliseconds
        }

        let key = arguments[0], value = arguments[1]
        let existing = lookup(key, now: now)
        if options.returnOld {
            if let existing { withValue(at: existing) { reply.appendBulk($0) } } else { reply.appendNull() }
        }
        if (options.ifAbsent && existing != nil) || (options.ifPresent && existing == nil) {
            if !options.returnOld { reply.appendNull() }
            return
        }
        let stored: Index
        if let existing {
            replace(at: existing, with: value, keepingDeadline: options.keepDeadline)
            stored = existing
        } else {
            stored = insert(key, value: value)
        }
        if let deadline { setDeadline(at: stored, deadline) }
        if !options.returnOld { reply.appendSimple("OK") }
    }

    // MARK: - EXPIRE, PEXPIRE

    /// `expireGenericCommand`: options first, then the time (relative to now), then the key;
    /// a deadline already past removes the key and answers 1.
    private mutating func expire(_ arguments: [UnsafeRawBufferPointer], unitMilliseconds: Int64, name: String,
                                 now: Int64, into reply: inout ByteBuffer) {
        var ifNone = false, ifAny = false, ifGreater = false, ifLess = false
        for option in arguments.dropFirst(2) {
            if ASCII.equals(option, "nx") {
                ifNone = true
            } else if ASCII.equals(option, "xx") {
                ifAny = true
            } else if ASCII.equals(option, "gt") {
                ifGreater = true
            } else if ASCII.equals(option, "lt") {
                ifLess = true
            } else {
                return reply.appendError(Array("Unsupported option ".utf8) + ASCII.text(option))
            }
        }
        if ifNone && (ifAny || ifGreater || ifLess) {
            return reply.appendError("NX and XX, GT or LT options at the same time are not compatible")
        }
        if ifGreater && ifLess {
            return reply.appendError("GT and LT options at the same time are not compatible")
        }
        guard var when = RedisInteger.parse(arguments[1]) else { return reply.appendNotAnInteger() }
        if unitMilliseconds == 1000 {
            if when > Int64.max / 1000 || when < Int64.min / 1000 {
                return reply.appendError("invalid expire time in '\(name)' command")
            }
            when *= 1000
        }
        if when > Int64.max - now { return reply.appendError("invalid expire time in '\(name)' command") }
        when += now

        guard let index = lookup(arguments[0], now: now) else { return reply.appendInteger(0) }
        let current = expiresAt(index)
        if ifNone && current != 0 { return reply.appendInteger(0) }
        if ifAny && current == 0 { return reply.appendInteger(0) }
        if ifGreater && (current == 0 || when <= current) { return reply.appendInteger(0) }
        if ifLess && current != 0 && when >= current { return reply.appendInteger(0) }
        if when <= now {
            remove(at: index)
        } else {
            setDeadline(at: index, when)
        }
        reply.appendInteger(1)
    }
}

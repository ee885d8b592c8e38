#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// The network thread: a resident thread whose loop holds the listening socket's fd source, one
/// fd source per client connection, the port the shards answer on, and one Source0 that ends
/// each pass's work (`flush`).
///
/// A pass of its loop reads every connection that is readable (level-triggered, one read each,
/// so a busy client cannot starve the others), parses the commands, answers the local ones at
/// once and appends each key command to the batch of the shard that owns the key. Replies that
/// came back from the shards in the same pass are appended to their connections' output, in
/// command order. Both only signal `flush`, which the next pass performs before it looks for
/// more work: it sends each shard its batch as one port message (however many connections and
/// commands it holds), then writes each connection's output with one send(2). So the hand-offs
/// between threads cost one message per shard per pass, not one per command.
///
/// Backpressure, per connection: past `maxOutputBytes` of unwritten replies the connection's
/// source stops asking for `.readable` (its client is not reading), and resumes once the
/// output is back under half of that; a connection waiting on a shard that has as many
/// batches in flight as it may, and a full one being built, asks for nothing until the shard
/// answers. Every state and buffer here is touched on the network thread only (each callout of
/// its loop runs there; other threads reach it through `perform`).
final class NetworkServer: @unchecked Sendable {
    struct Limits {
        var maxClients: Int
        var maxBulkLength: Int
        var maxRequestBytes: Int
        var maxOutputBytes: Int
        var maxPipeline: Int
    }

    /// Batches one shard may have in flight: fewer than its inbox holds, so that sending one
    /// never waits.
    static let maxBatchesInFlight = 256
    /// Past this, a batch that cannot be sent yet takes no more commands.
    static let fullBatchBytes = 4 << 20
    /// One read's worth: what a connection that has no partial command reads into.
    static let readSize = 64 * 1024
    /// A connection that held this much (input, output, or a command's arguments) gives its
    /// memory back to the system when it closes (`giveMemoryBack()`).
    static let largeConnectionBytes = 1 << 20
    /// At most one malloc_trim(3) per interval: it walks every arena, and a burst of large
    /// connections closing needs only one.
    static let trimInterval: Duration = .seconds(1)

    let thread: ResidentThread
    private let limits: Limits
    private let shards: [Shard]
    /// Where shards answer (the reply port of every request batch).
    private let replies: MessagePort
    private let listenerDescriptor: Int32
    private let local: LocalCommands

    // Network thread only, from here on (set up by `init` before any callout can run). The
    // runtime's exclusivity checks on these would only repeat that: they were a fifth of the
    // thread's instructions in user space (callgrind, redis-benchmark SET and GET).
    @exclusivity(unchecked) private var listener: FileDescriptorSource!
    @exclusivity(unchecked) private var flush: RunLoopSource!
    @exclusivity(unchecked) private var outboxes: [Outbox]
    @exclusivity(unchecked) private var connections: [Connection?] = []
    @exclusivity(unchecked) private var generations: [UInt32] = []
    @exclusivity(unchecked) private var freeSlots: [UInt32] = []
    @exclusivity(unchecked) private var openConnections = 0
    @exclusivity(unchecked) private var nextClientID: Int64 = 1
    @exclusivity(unchecked) private var dirty: [Connection] = []
    @exclusivity(unchecked) private var writing: [Connection] = []
    @exclusivity(unchecked) private var resumable: [Connection] = []
    @exclusivity(unchecked) private var parser: RequestParser
    @exclusivity(unchecked) private var scratch = ByteBuffer(capacity: 4096)
    private let readBuffer: UnsafeMutableRawPointer
    /// An open descriptor given up when accept(2) runs out of them, to accept and close the
    /// waiting connection rather than leave it readable on the listening socket for ever.
    @exclusivity(unchecked) private var spareDescriptor: Int32
    @exclusivity(unchecked) private var listening = true
    @exclusivity(unchecked) private var draining = false
    @exclusivity(unchecked) private var onDrained: (@Sendable () -> Void)?
    /// Replies appended to connections' output, for the shutdown report.
    @exclusivity(unchecked) private(set) var repliesQueued = 0
    @exclusivity(unchecked) private var lastTrim: ContinuousClock.Instant?
    /// The trim put off to the end of the current interval, if one is.
    @exclusivity(unchecked) private var trimTimer: RunLoopTimer?
    /// Set by `stop()`: the loop runs no more timers.
    @exclusivity(unchecked) private var stopped = false

    /// The batch being built for one shard, and the connections waiting for room in it.
    final class Outbox {
        @exclusivity(unchecked) var batch = ByteBuffer()
        @exclusivity(unchecked) var inFlight = 0
        @exclusivity(unchecked) var waiting: [Connection] = []
    }

    init(listener: Listener, shards: [Shard], limits: Limits, settings: [(name: String, value: String)]) throws(PortError) {
        self.limits = limits
        self.shards = shards
        listenerDescriptor = listener.descriptor
        local = LocalCommands(settings: settings)
        parser = RequestParser(maxBulkLength: limits.maxBulkLength, maxRequestBytes: limits.maxRequestBytes)
        outboxes = shards.map { _ in Outbox() }
        readBuffer = .allocate(byteCount: Self.readSize, alignment: 16)
        spareDescriptor = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
        replies = try MessagePort(queueLimit: Self.maxBatchesInFlight * shards.count + 16)
        thread = ResidentThread(name: "kv-network")

        flush = RunLoopSource(order: 0) { [unowned self] in flushPass() }
        self.listener = FileDescriptorSource(fileDescriptor: listener.descriptor, events: .readable) { [unowned self] _, _ in
            acceptConnections()
        }
        replies.setHandler { [unowned self] message in receiveReplies(message) }
        let loop = thread.runLoop
        loop.add(flush, forMode: .default)
        loop.add(replies, forMode: .default)
        loop.add(self.listener, forMode: .default)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Stops the thread (waiting for it), then closes every connection left and the listener;
    /// returns how many of them still had replies to write.
    @discardableResult
    func stop() -> Int {
        thread.stop()
        stopped = true
        trimTimer?.invalidate()
        let left = connections.compactMap { $0 }
        let unfinished = left.count { !$0.allAnswered || !$0.output.isEmpty }
        for connection in left { close(connection) }
        stopListening()
        replies.invalidate()
        flush.invalidate()
        if spareDescriptor >= 0 { Glibc.close(spareDescriptor) }
        return unfinished
    }

    /// Shutdown: stops accepting and reading; every command already read is answered and
    /// written, each connection closes once it has nothing left, and `drained` runs on the
    /// network thread when the last one has. Network thread.
    func drain(then drained: @escaping @Sendable () -> Void) {
        draining = true
        onDrained = drained
        // Closed rather than only unwatched, so that new clients are refused at once instead
        // of waiting in the backlog of a socket nobody accepts on.
        stopListening()
        for connection in connections.compactMap({ $0 }) {
            connection.closing = true
            connection.input.removeAll(keeping: 0)
            closeIfDone(connection)
            if !connection.isClosed { updateInterest(connection) }
        }
        if openConnections == 0 { finishDrain() }
    }

    private func stopListening() {
        guard listening else { return }
        listening = false
        listener.invalidate()
        Glibc.close(listenerDescriptor)
    }

    private func finishDrain() {
        let drained = onDrained
        onDrained = nil
        drained?()
    }

    // MARK: - Accepting

    private func acceptConnections() {
        for _ in 0..<64 {
            let fd = accept(listenerDescriptor, nil, nil)
            if fd < 0 {
                switch errno {
                case EINTR, ECONNABORTED:
                    continue
                case EMFILE, ENFILE:
                    shedOneConnection()
                    return
                default:
                    // EAGAIN: nothing more waiting.
                    return
                }
            }
            guard openConnections < limits.maxClients && !draining else {
                refuse(fd)
                continue
            }
            // Glibc's module does not export accept4(2): two more calls per connection.
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var on: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
            open(fd)
        }
    }

    /// Out of descriptors: the connection waiting in the backlog would keep the listening
    /// socket readable, and the loop would spin on it. Give up the spare descriptor, accept
    /// the connection and close it (its client sees the connection reset), take the spare again.
    private func shedOneConnection() {
        log("out of file descriptors: a connection was refused (raise the limit: ulimit -n)")
        if spareDescriptor >= 0 { Glibc.close(spareDescriptor) }
        let fd = accept(listenerDescriptor, nil, nil)
        if fd >= 0 { Glibc.close(fd) }
        spareDescriptor = Glibc.open("/dev/null", O_RDONLY | O_CLOEXEC)
    }

    /// Redis's answer past `maxclients`, then the connection closes.
    private func refuse(_ fd: Int32) {
        let message: StaticString = "-ERR max number of clients reached\r\n"
        _ = send(fd, message.utf8Start, message.utf8CodeUnitCount, Int32(MSG_NOSIGNAL))
        Glibc.close(fd)
    }

    private func open(_ fd: Int32) {
        let slot: UInt32
        if let free = freeSlots.popLast() {
            slot = free
            generations[Int(slot)] &+= 1
        } else {
            slot = UInt32(connections.count)
            connections.append(nil)
            generations.append(0)
        }
        let connection = Connection(slot: slot, generation: generations[Int(slot)], descriptor: fd, id: nextClientID)
        nextClientID += 1
        connections[Int(slot)] = connection
        openConnections += 1
        connection.source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { [unowned self] _, events in
            if events.contains(.writable) { write(connection) }
            if events.contains(.readable) && !connection.isClosed { read(connection) }
        }
        thread.runLoop.add(connection.source, forMode: .default)
    }

    private func close(_ connection: Connection) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        // The source leaves the loop before its descriptor is closed.
        connection.source.invalidate()
        connection.source = nil
        Glibc.close(connection.descriptor)
        let large = max(connection.input.capacity, connection.output.capacity) >= Self.largeConnectionBytes || parser.holdsMemory
        connection.held = [:]
        connection.input.removeAll(keeping: 0)
        connection.output.removeAll(keeping: 0)
        parser.releaseMemory()
        if large { giveMemoryBack() }
        connections[Int(connection.slot)] = nil
        freeSlots.append(connection.slot)
        openConnections -= 1
        if draining && openConnections == 0 { finishDrain() }
    }

    /// Returns the memory a large connection freed to the system (its large buffers went back
    /// when freed, `Malloc.fixMmapThreshold()`; this is for the smaller ones malloc keeps in
    /// its arenas): malloc_trim(0) now, or at the end of the interval when one ran less than `trimInterval`
    /// ago (one timer at most, none while no large connection closes).
    private func giveMemoryBack() {
        guard !stopped, trimTimer == nil else { return }
        let now = ContinuousClock.now
        guard let last = lastTrim, last.duration(to: now) < Self.trimInterval else {
            Malloc.trim()
            lastTrim = now
            return
        }
        let timer = RunLoopTimer(fireAt: last + Self.trimInterval) { [unowned self] _ in
            trimTimer = nil
            Malloc.trim()
            lastTrim = .now
        }
        timer.label = "malloc_trim"
        trimTimer = timer
        thread.runLoop.add(timer, forMode: .default)
    }

    // MARK: - Reading

    private func read(_ connection: Connection) {
        if connection.lingering {
            let n = recv(connection.descriptor, readBuffer, Self.readSize, 0)
            if n <= 0 { readFailed(connection, n) }
            return
        }
        if connection.input.isEmpty {
            let n = recv(connection.descriptor, readBuffer, Self.readSize, 0)
            guard n > 0 else { return readFailed(connection, n) }
            let bytes = UnsafeRawBufferPointer(start: readBuffer, count: n)
            let consumed = process(connection, bytes)
            if consumed < n && !connection.isClosed && !connection.closing {
                connection.input.append(UnsafeRawBufferPointer(rebasing: bytes[consumed...]))
            }
        } else {
            let wanted = max(connection.needed - connection.input.count, 16 * 1024)
            let room = connection.input.reserveTail(min(wanted, limits.maxRequestBytes))
            let n = recv(connection.descriptor, room, connection.input.tailRoom, 0)
            guard n > 0 else { return readFailed(connection, n) }
            connection.input.didAppend(n)
            if connection.input.count >= connection.needed {
                let consumed = process(connection, connection.input.bytes)
                if !connection.isClosed { connection.input.consume(consumed) }
            }
        }
        guard !connection.isClosed else { return }
        if connection.input.count > limits.maxRequestBytes {
            // Redis closes a client past client-query-buffer-limit without a reply, too.
            log("client \(connection.id) closed: a request larger than \(limits.maxRequestBytes) bytes")
            return close(connection)
        }
        if connection.input.isEmpty { connection.input.removeAll(keeping: 64 * 1024) }
        updateInterest(connection)
    }

    private func readFailed(_ connection: Connection, _ result: Int) {
        if result < 0 && (errno == EAGAIN || errno == EINTR) { return }
        // End of file (Redis also closes at once then, replies pending or not) or a reset.
        close(connection)
    }

    /// Parses and dispatches the commands in `bytes`; returns how many bytes it used. Stops at
    /// an incomplete command, and before a command when the connection must wait (closing,
    /// waiting for a shard, or over its output limit).
    private func process(_ connection: Connection, _ bytes: UnsafeRawBufferPointer) -> Int {
        var position = 0
        connection.needed = 0
        while position < bytes.count && canParse(connection) {
            switch parser.parse(UnsafeRawBufferPointer(rebasing: bytes[position...])) {
            case .command(let consumed):
                guard dispatch(connection) else { return position }
                if connection.isClosed { return bytes.count }
                position += consumed
            case .nothing(let consumed):
                position += consumed
            case .incomplete(let needed):
                connection.needed = needed
                return position
            case .protocolError(let message):
                answerLocally(connection) { $0.appendError(message) }
                connection.closing = true
                return bytes.count
            case .tooLarge:
                // As past client-query-buffer-limit below: closed without a reply.
                log("client \(connection.id) closed: a request larger than \(limits.maxRequestBytes) bytes "
                    + "(with \(RequestParser.argumentOverhead) bytes an argument)")
                close(connection)
                return bytes.count
            }
        }
        return position
    }

    /// Whether the connection may take another command now: not closing, not waiting for a
    /// shard, and neither too much output unread by its client nor too many commands unanswered.
    private func canParse(_ connection: Connection) -> Bool {
        !connection.closing && !connection.waitingForShard && connection.output.count <= limits.maxOutputBytes
            && Int(connection.issued &- connection.answered) < limits.maxPipeline
    }

    // MARK: - Dispatching

    /// Answers or routes the command the parser holds; false when it must wait for a shard
    /// (nothing was taken: it is parsed again once the shard has room).
    private func dispatch(_ connection: Connection) -> Bool {
        let arguments = parser.arguments
        guard let command = Command.named(arguments[0]) else {
            if ASCII.equals(arguments[0], "host:") || ASCII.equals(arguments[0], "post") {
                // Redis's guard against HTTP requests sent to it (cross-protocol scripting):
                // the connection is dropped, replies pending or not.
                log("client \(connection.id) closed: it sent an HTTP request")
                close(connection)
                return true
            }
            answerLocally(connection) { $0.appendError(LocalCommands.unknownCommand(arguments)) }
            return true
        }
        guard command.accepts(argumentCount: arguments.count) else {
            answerLocally(connection) { $0.appendArityError(command.name) }
            return true
        }
        switch command.route {
        case .local:
            answerLocally(connection) { local.answer(command, arguments, connection: connection, into: &$0) }
        case .oneKey:
            let shard = shardIndex(of: arguments[1])
            guard hasRoom(shard, for: connection) else { return false }
            let outbox = outboxes[shard]
            outbox.batch.appendRequest(RequestTag(slot: connection.slot, generation: connection.generation,
                                                  sequence: connection.issue()),
                                       command: command, isPart: false, argumentCount: arguments.count - 1)
            for index in 1..<arguments.count { outbox.batch.appendArgument(arguments[index]) }
            queued()
        case .keys(let stride):
            if command == .mset && arguments.count % 2 == 0 {
                answerLocally(connection) { $0.appendArityError("mset") }
                return true
            }
            return dispatchKeys(command, stride: stride, arguments, connection)
        case .everyShard:
            if command == .flushall && !(arguments.count == 1 || (arguments.count == 2
                && (ASCII.equals(arguments[1], "sync") || ASCII.equals(arguments[1], "async")))) {
                answerLocally(connection) { $0.appendSyntaxError() }
                return true
            }
            guard outboxes.indices.allSatisfy({ hasRoom($0, for: connection) }) else { return false }
            let sequence = connection.issue()
            if shards.count > 1 {
                connection.held[sequence] = .gathering(Gather(command: command, shards: shards.count, expecting: shards.count))
            }
            for outbox in outboxes {
                outbox.batch.appendRequest(RequestTag(slot: connection.slot, generation: connection.generation, sequence: sequence),
                                           command: command, isPart: shards.count > 1, argumentCount: 0)
            }
            queued()
        }
        return true
    }

    /// A command on keys (DEL, EXISTS, MGET: stride 1; MSET: stride 2, key and value): whole to
    /// one shard when every key is there, else split into one part per shard and gathered.
    private func dispatchKeys(_ command: Command, stride: Int, _ arguments: [UnsafeRawBufferPointer],
                              _ connection: Connection) -> Bool {
        let keyShards = Swift.stride(from: 1, to: arguments.count, by: stride).map { shardIndex(of: arguments[$0]) }
        let involved = Set(keyShards)
        guard involved.allSatisfy({ hasRoom($0, for: connection) }) else { return false }
        let sequence = connection.issue()
        let tag = RequestTag(slot: connection.slot, generation: connection.generation, sequence: sequence)
        if involved.count == 1 {
            let outbox = outboxes[keyShards[0]]
            outbox.batch.appendRequest(tag, command: command, isPart: false, argumentCount: arguments.count - 1)
            for index in 1..<arguments.count { outbox.batch.appendArgument(arguments[index]) }
        } else {
            connection.held[sequence] = .gathering(Gather(command: command, shards: shards.count, expecting: involved.count,
                                                          keyShards: command == .mget ? keyShards : []))
            for shard in involved.sorted() {
                let mine = keyShards.indices.filter { keyShards[$0] == shard }
                let outbox = outboxes[shard]
                outbox.batch.appendRequest(tag, command: command, isPart: true, argumentCount: mine.count * stride)
                for key in mine {
                    for offset in 0..<stride { outbox.batch.appendArgument(arguments[1 + key * stride + offset]) }
                }
            }
        }
        queued()
        return true
    }

    /// Whether `shard` can take another command now. When not, `connection` waits for it.
    private func hasRoom(_ shard: Int, for connection: Connection) -> Bool {
        let outbox = outboxes[shard]
        guard outbox.inFlight >= Self.maxBatchesInFlight && outbox.batch.count >= Self.fullBatchBytes else { return true }
        connection.waitingForShard = true
        outbox.waiting.append(connection)
        return false
    }

    /// FNV-1a over the key: which shard owns it.
    private func shardIndex(of key: UnsafeRawBufferPointer) -> Int {
        guard shards.count > 1 else { return 0 }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in key {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return Int(hash % UInt64(shards.count))
    }

    private func queued() {
        flush.signal()
    }

    /// A reply the network thread makes itself: written to the output at once when nothing
    /// is pending before it, else held until its turn.
    private func answerLocally(_ connection: Connection, _ body: (inout ByteBuffer) -> Void) {
        let sequence = connection.issue()
        if sequence == connection.answered {
            body(&connection.output)
            connection.answered &+= 1
        } else {
            scratch.removeAll(keeping: 64 * 1024)
            body(&scratch)
            connection.held[sequence] = .ready(Array(scratch.bytes))
        }
        repliesQueued += 1
        markDirty(connection)
    }

    // MARK: - Replies from the shards

    private func receiveReplies(_ message: MessagePort.Message) {
        let shard = Int(message.msgid &- ShardBatch.replies)
        guard shards.indices.contains(shard), let batch = message.data else {
            return log("unexpected message \(message.msgid) dropped")
        }
        let outbox = outboxes[shard]
        outbox.inFlight -= 1
        batch.withUnsafeBytes { bytes in
            var reader = ReplyReader(bytes)
            var connection: Connection?
            while let (tag, isPart, resp) = reader.next() {
                if connection?.slot != tag.slot || connection?.generation != tag.generation {
                    connection = connections.indices.contains(Int(tag.slot)) ? connections[Int(tag.slot)] : nil
                    if connection?.generation != tag.generation { connection = nil }
                    if let connection { markDirty(connection) }
                }
                // A connection that closed meanwhile: its replies go nowhere.
                guard let connection else { continue }
                repliesQueued += isPart ? 0 : 1
                if isPart {
                    gather(resp, from: shard, for: tag.sequence, connection)
                } else {
                    connection.deliver(tag.sequence, resp)
                }
            }
        }
        if !outbox.waiting.isEmpty {
            resumable += outbox.waiting
            outbox.waiting = []
        }
        flush.signal()
    }

    private func gather(_ part: UnsafeRawBufferPointer, from shard: Int, for sequence: UInt32, _ connection: Connection) {
        guard case .gathering(let gather)? = connection.held[sequence], gather.add(part, from: shard) else { return }
        repliesQueued += 1
        let merged = gather.reply()
        connection.held[sequence] = nil
        merged.withUnsafeBytes { connection.deliver(sequence, $0) }
    }

    // MARK: - The end of a pass

    private func markDirty(_ connection: Connection) {
        guard !connection.isDirty else { return }
        connection.isDirty = true
        dirty.append(connection)
        flush.signal()
    }

    /// Performed at the start of the pass after work was queued: resumes connections that
    /// waited for a shard, sends every batch a shard can take, writes every connection's output.
    private func flushPass() {
        if !resumable.isEmpty {
            let resumed = resumable
            resumable = []
            for connection in resumed where !connection.isClosed {
                connection.waitingForShard = false
                resume(connection)
            }
        }
        for (index, outbox) in outboxes.enumerated() where !outbox.batch.isEmpty && outbox.inFlight < Self.maxBatchesInFlight {
            do {
                try shards[index].inbox.send(msgid: ShardBatch.requests, components: [.data(outbox.batch.takeData())],
                                             from: replies, before: .now)
                outbox.inFlight += 1
            } catch {
                // Only when the shard is gone (shutdown): the commands are lost with it.
                log("batch for shard \(index) dropped: \(error)")
            }
        }
        // Swapped with a spare list rather than copied: both keep their memory from pass to pass.
        swap(&dirty, &writing)
        for connection in writing {
            connection.isDirty = false
            if !connection.isClosed { write(connection) }
        }
        writing.removeAll(keepingCapacity: true)
    }

    /// Parses what a waiting connection kept in its input.
    private func resume(_ connection: Connection) {
        guard !connection.input.isEmpty else { return updateInterest(connection) }
        let consumed = process(connection, connection.input.bytes)
        guard !connection.isClosed else { return }
        connection.input.consume(consumed)
        updateInterest(connection)
    }

    // MARK: - Writing

    private func write(_ connection: Connection) {
        while !connection.output.isEmpty {
            let bytes = connection.output.bytes
            let n = send(connection.descriptor, bytes.baseAddress!, bytes.count, Int32(MSG_NOSIGNAL))
            if n > 0 {
                connection.output.consume(n)
            } else if n < 0 && errno == EINTR {
                continue
            } else if n < 0 && errno == EAGAIN {
                break
            } else {
                return close(connection)
            }
        }
        connection.writeBlocked = !connection.output.isEmpty
        if !connection.writeBlocked { connection.output.removeAll(keeping: 64 * 1024) }
        if closeIfDone(connection) { return }
        if !connection.input.isEmpty && canParse(connection) && connection.output.count <= limits.maxOutputBytes / 2
            && connection.needed <= connection.input.count {
            // Commands kept while the client was not reading: parse them now.
            resume(connection)
            return
        }
        updateInterest(connection)
    }

    /// Closes a closing connection once every reply is out; true if it did. While draining, one
    /// whose client has sent more lingers instead: a socket closed with requests unread in its
    /// buffer sends a reset, which can destroy the replies still on their way, so it shuts down
    /// its writing side (the client reads every reply, then end of file), then discards what
    /// comes until the client closes (or the drain times out).
    @discardableResult
    private func closeIfDone(_ connection: Connection) -> Bool {
        guard connection.closing && connection.allAnswered && connection.output.isEmpty else { return false }
        var byte: UInt8 = 0
        guard draining && recv(connection.descriptor, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 else {
            close(connection)
            return true
        }
        if !connection.lingering {
            connection.lingering = true
            shutdown(connection.descriptor, Int32(SHUT_WR))
            updateInterest(connection)
        }
        return true
    }

    /// Makes the connection's source ask for what it can use now: `.readable` while it may take
    /// commands (`canParse`: its client reads its replies, its shards have room);
    /// `.writable` while output is left that the socket would not take. Neither: the source is
    /// paused (it keeps its place in the loop).
    private func updateInterest(_ connection: Connection) {
        var events: FileDescriptorSource.Events = []
        if canParse(connection) || connection.lingering { events.insert(.readable) }
        if connection.writeBlocked { events.insert(.writable) }
        guard events != connection.watching else { return }
        connection.watching = events
        connection.source.events = events
    }
}

import FoundationEssentials

/// Which connection and which of its commands a request or reply belongs to: the connection's
/// slot in the network thread's table, the slot's generation (a reply for a connection that
/// closed, whose slot a new one took, is recognised and dropped), and the command's sequence
/// number on that connection, which puts replies from several shards back in order.
struct RequestTag: Equatable {
    var slot: UInt32
    var generation: UInt32
    var sequence: UInt32
}

/// The two kinds of port message between the network thread and a shard: one carries a batch
/// of requests (every command the network thread read for that shard in one pass of its loop,
/// from any number of connections), the other the batch of their replies. Each is one Data
/// component, built in a `ByteBuffer` and handed over without a copy; the shard answers through
/// the request message's reply port.
///
/// A request: tag (3 × UInt32), the command (UInt8), whether it is a shard's part of a
/// command split over several shards (UInt8), the argument count (UInt32), then each argument
/// as a UInt32 length and its bytes (the command name is not sent). A reply: tag, the part
/// flag, a UInt32 length and the RESP bytes. Integers in this machine's byte order: the batches
/// never leave the process.
enum ShardBatch {
    /// msgid of a batch of requests.
    static let requests: UInt32 = 1
    /// msgid of a batch of replies; the shard's index is added.
    static let replies: UInt32 = 0x100

    static let requestHeaderSize = 18
    static let replyHeaderSize = 17
}

extension ByteBuffer {
    /// Starts a request; its arguments follow with `appendArgument`.
    mutating func appendRequest(_ tag: RequestTag, command: Command, isPart: Bool, argumentCount: Int) {
        let at = reserveTail(ShardBatch.requestHeaderSize)
        at.storeBytes(of: tag.slot, toByteOffset: 0, as: UInt32.self)
        at.storeBytes(of: tag.generation, toByteOffset: 4, as: UInt32.self)
        at.storeBytes(of: tag.sequence, toByteOffset: 8, as: UInt32.self)
        at.storeBytes(of: command.rawValue, toByteOffset: 12, as: UInt8.self)
        at.storeBytes(of: isPart ? 1 : 0, toByteOffset: 13, as: UInt8.self)
        at.storeBytes(of: UInt32(argumentCount), toByteOffset: 14, as: UInt32.self)
        didAppend(ShardBatch.requestHeaderSize)
    }

    mutating func appendArgument(_ bytes: UnsafeRawBufferPointer) {
        append(native: UInt32(bytes.count))
        append(bytes)
    }

    /// Starts a reply whose RESP bytes follow; returns where its length goes (`finishReply`).
    mutating func beginReply(_ tag: RequestTag, isPart: Bool) -> Int {
        let at = reserveTail(ShardBatch.replyHeaderSize)
        at.storeBytes(of: tag.slot, toByteOffset: 0, as: UInt32.self)
        at.storeBytes(of: tag.generation, toByteOffset: 4, as: UInt32.self)
        at.storeBytes(of: tag.sequence, toByteOffset: 8, as: UInt32.self)
        at.storeBytes(of: isPart ? 1 : 0, toByteOffset: 12, as: UInt8.self)
        let lengthOffset = count + 13
        didAppend(ShardBatch.replyHeaderSize)
        return lengthOffset
    }

    /// Fills in the length of the reply begun at `lengthOffset`.
    mutating func finishReply(lengthAt lengthOffset: Int) {
        store(native: UInt32(count - lengthOffset - 4), at: lengthOffset)
    }
}

/// Reads the requests of a batch, one after another. The arguments point into the batch.
struct RequestReader {
    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    /// The next request's tag, command and part flag, its arguments in `arguments`; nil at the end.
    mutating func next(arguments: inout [UnsafeRawBufferPointer]) -> (RequestTag, Command, isPart: Bool)? {
        guard position < bytes.count else { return nil }
        let tag = RequestTag(slot: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self),
                             generation: bytes.loadUnaligned(fromByteOffset: position + 4, as: UInt32.self),
                             sequence: bytes.loadUnaligned(fromByteOffset: position + 8, as: UInt32.self))
        let command = Command(rawValue: bytes[position + 12])!
        let isPart = bytes[position + 13] != 0
        let count = Int(bytes.loadUnaligned(fromByteOffset: position + 14, as: UInt32.self))
        position += ShardBatch.requestHeaderSize
        arguments.removeAll(keepingCapacity: true)
        for _ in 0..<count {
            let length = Int(bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self))
            position += 4
            arguments.append(UnsafeRawBufferPointer(rebasing: bytes[position..<(position + length)]))
            position += length
        }
        return (tag, command, isPart)
    }
}

/// Reads the replies of a batch, one after another. The RESP bytes point into the batch.
struct ReplyReader {
    private let bytes: UnsafeRawBufferPointer
    private var position = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    mutating func next() -> (RequestTag, isPart: Bool, resp: UnsafeRawBufferPointer)? {
        guard position < bytes.count else { return nil }
        let tag = RequestTag(slot: bytes.loadUnaligned(fromByteOffset: position, as: UInt32.self),
                             generation: bytes.loadUnaligned(fromByteOffset: position + 4, as: UInt32.self),
                             sequence: bytes.loadUnaligned(fromByteOffset: position + 8, as: UInt32.self))
        let isPart = bytes[position + 12] != 0
        let length = Int(bytes.loadUnaligned(fromByteOffset: position + 13, as: UInt32.self))
        position += ShardBatch.replyHeaderSize
        let resp = UnsafeRawBufferPointer(rebasing: bytes[position..<(position + length)])
        position += length
        return (tag, isPart, resp)
    }
}

import RunLoopKit

/// One client connection: its descriptor and fd source, the bytes read but not yet parsed, the
/// replies not yet written, and the bookkeeping that answers pipelined commands in order when
/// several shards answer them.
///
/// Every command gets the next sequence number when it is read (`issued`); replies are appended
/// to `output` strictly in that order (`answered` is the next one due). A reply that comes
/// before an earlier one (from another shard, or a local reply behind a command still at a
/// shard) waits in `held`, as does a command split over several shards until its parts are in.
/// Touched only on the network thread, whose loop runs every callout that reaches it, so its
/// fields skip the runtime's exclusivity checks, which would only repeat that.
final class Connection: @unchecked Sendable {
    /// A reply that cannot be written yet.
    enum Held {
        case ready([UInt8])
        case gathering(Gather)
    }

    let slot: UInt32
    let generation: UInt32
    let descriptor: Int32
    /// The number CLIENT ID and HELLO report.
    let id: Int64
    @exclusivity(unchecked) var source: FileDescriptorSource!
    /// The events `source` was last given (kept here to skip setting the same ones again).
    @exclusivity(unchecked) var watching: FileDescriptorSource.Events = .readable

    /// Input kept between reads: the start of a command not all there yet, or commands not
    /// parsed while the connection waits (for its client to read, or for a shard).
    @exclusivity(unchecked) var input = ByteBuffer()
    /// The length `input` must reach before the incomplete command at its front is worth
    /// parsing again (a large value arrives in many reads).
    @exclusivity(unchecked) var needed = 0
    @exclusivity(unchecked) var output = ByteBuffer()

    @exclusivity(unchecked) var issued: UInt32 = 0
    @exclusivity(unchecked) var answered: UInt32 = 0
    @exclusivity(unchecked) var held: [UInt32: Held] = [:]

    /// CLIENT SETNAME.
    @exclusivity(unchecked) var name: [UInt8]?
    /// No more commands are read (QUIT, a protocol error, shutdown); the connection closes
    /// once every reply due is written.
    @exclusivity(unchecked) var closing = false
    /// Parsing stopped because a shard this connection's next command needs has a full batch
    /// and as many in flight as it may have: it resumes when that shard answers.
    @exclusivity(unchecked) var waitingForShard = false
    /// The last write left output behind (the socket's buffer is full): the source watches for
    /// writable until it is all out.
    @exclusivity(unchecked) var writeBlocked = false
    /// Shut down for writing at shutdown, every reply sent: input is discarded until the client
    /// closes (`NetworkServer.closeIfDone`).
    @exclusivity(unchecked) var lingering = false
    /// Queued for the end-of-pass flush.
    @exclusivity(unchecked) var isDirty = false
    @exclusivity(unchecked) var isClosed = false

    init(slot: UInt32, generation: UInt32, descriptor: Int32, id: Int64) {
        self.slot = slot
        self.generation = generation
        self.descriptor = descriptor
        self.id = id
    }

    var tag: RequestTag { RequestTag(slot: slot, generation: generation, sequence: issued) }

    /// Whether every command read has had its reply appended to `output`.
    var allAnswered: Bool { answered == issued }

    /// Takes the next sequence number for a command.
    func issue() -> UInt32 {
        defer { issued &+= 1 }
        return issued
    }

    /// Appends the reply to command `sequence`, then every held reply that was waiting for it.
    func deliver(_ sequence: UInt32, _ reply: UnsafeRawBufferPointer) {
        if sequence == answered {
            output.append(reply)
            answered &+= 1
            if !held.isEmpty { appendHeldReplies() }
        } else {
            held[sequence] = .ready(Array(reply))
        }
    }

    /// Appends the held replies that are now due, in order.
    func appendHeldReplies() {
        while case .ready(let bytes)? = held[answered] {
            held[answered] = nil
            bytes.withUnsafeBytes { output.append($0) }
            answered &+= 1
        }
    }
}

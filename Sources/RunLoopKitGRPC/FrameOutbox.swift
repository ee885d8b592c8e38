#if GRPC
import FoundationEssentials
import RunLoopKit

/// The frames waiting to be written to one bridge stream, in a local port whose queue limit is
/// the stream's share of backpressure: senders on any thread put encoded frames in it (and
/// block or suspend while it is full, as on any port), and the stream's writer task takes
/// them with `messages()` as fast as gRPC's flow control lets it write. Invalidating it ends
/// the writer and fails every waiting and later sender with `.invalidPort`.
struct FrameOutbox: Sendable {
    let port: MessagePort

    /// Any thread; one eventfd. Throws `.resourceExhausted` when out of descriptors.
    init(limit: Int) throws(PortError) {
        port = try MessagePort(queueLimit: limit)
    }

    /// The longest wait `send(before: nil)` stands for: no deadline.
    private static let forever = Duration.seconds(100 * 365 * 86_400)

    /// Queues an encoded frame, waiting for room until `deadline` (nil: without limit).
    func put(_ frame: [UInt8], before deadline: ContinuousClock.Instant?) throws(PortError) {
        try port.send(msgid: 0, components: [.data(Data(frame))], before: deadline ?? .now + Self.forever)
    }

    /// Queues an encoded frame, suspending while the outbox is full.
    func put(_ frame: [UInt8]) async throws(PortError) {
        try await port.send(msgid: 0, components: [.data(Data(frame))])
    }

    /// The most frames one write hands to the stream.
    private static let batchLimit = 64

    /// Writes every frame with `write` until the outbox is closed or the task cancelled: the
    /// frames queued when the writer wakes go together, so a burst costs one hand-off to the
    /// connection's event loop and one flush instead of one each.
    func drain(_ write: ([EncodedFrame]) async throws -> Void) async throws {
        var frames = port.messages().makeAsyncIterator()
        var batch: [EncodedFrame] = []
        batch.reserveCapacity(Self.batchLimit)
        while let first = await frames.next() {
            batch.append(EncodedFrame(bytes: first.data ?? Data()))
            // One consumer: a frame counted as queued is taken without suspending.
            while batch.count < Self.batchLimit, port.queuedCount > 0, let next = await frames.next() {
                batch.append(EncodedFrame(bytes: next.data ?? Data()))
            }
            try await write(batch)
            batch.removeAll(keepingCapacity: true)
        }
    }

    /// Ends the stream's writer; senders get `.invalidPort`. Idempotent; any thread.
    func close() { port.invalidate() }
}

/// The Data components of `message`: a bridge carries nothing else across hosts.
func dataComponents(of message: MessagePort.Message) throws(PortError) -> [Data] {
    var data: [Data] = []
    data.reserveCapacity(message.components.count)
    for component in message.components {
        guard case .data(let bytes) = component else { throw .notTransferable }
        data.append(bytes)
    }
    return data
}
#endif

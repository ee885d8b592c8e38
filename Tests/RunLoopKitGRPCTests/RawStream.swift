#if GRPC
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import Synchronization

/// A gRPC client of the bridge's method that writes whatever bytes it is given: the hostile
/// client of the tests, and a client without a certificate.
enum RawStream {
    static let descriptor = MethodDescriptor(fullyQualifiedService: "runloopkit.PortBridge", method: "Connect")

    struct Serializer: MessageSerializer {
        func serialize<Bytes: GRPCContiguousBytes>(_ message: [UInt8]) throws -> Bytes { Bytes(message) }
    }

    struct Deserializer: MessageDeserializer {
        func deserialize<Bytes: GRPCContiguousBytes>(_ bytes: Bytes) throws -> [UInt8] {
            bytes.withUnsafeBytes { Array($0) }
        }
    }

    struct Outcome: Sendable {
        /// The stream's status code; nil for OK.
        var code: RPCError.Code?
        /// The frames the server sent.
        var frames: [[UInt8]]
    }

    /// Writes `frames`, half-closes, and reads to the end.
    static func run(_ client: GRPCClient<some ClientTransport>, frames: [[UInt8]]) async -> Outcome {
        let received = ReceivedFrames()
        do {
            try await client.bidirectionalStreaming(
                request: StreamingClientRequest(of: [UInt8].self) { writer in
                    for frame in frames { try await writer.write(frame) }
                },
                descriptor: descriptor, serializer: Serializer(), deserializer: Deserializer(), options: .defaults
            ) { response in
                for try await frame in response.messages { received.append(frame) }
            }
            return Outcome(code: nil, frames: received.all)
        } catch let error as RPCError {
            return Outcome(code: error.code, frames: received.all)
        } catch {
            return Outcome(code: .unknown, frames: received.all)
        }
    }

    static func open(_ name: String) -> [UInt8] { [1, 1, 0, 0] + Array(name.utf8) }

    static func message(msgid: UInt32, data: [UInt8] = []) -> [UInt8] {
        var frame: [UInt8] = [1, 3, 0, 0]
        func append<T: FixedWidthInteger>(_ value: T) { withUnsafeBytes(of: value.littleEndian) { frame += $0 } }
        append(msgid)
        append(UInt32(0))
        append(UInt32(0))
        append(UInt64(0))
        append(UInt16(1))
        append(UInt16(0))
        append(UInt32(data.count))
        return frame + data
    }
}

/// Frames collected by a response handler.
final class ReceivedFrames: Sendable {
    private let frames = Mutex<[[UInt8]]>([])
    func append(_ frame: [UInt8]) { frames.withLock { $0.append(frame) } }
    var all: [[UInt8]] { frames.withLock { $0 } }
}
#endif

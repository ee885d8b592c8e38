#if GRPC
import FoundationEssentials
import GRPCCore

/// A frame already encoded (by the sender, whose thread pays for it), as the bridge's writers
/// queue it and gRPC sends it.
struct EncodedFrame: Sendable {
    let bytes: Data
}

/// gRPC's serializer for the bridge RPC: copies an encoded frame into gRPC's buffer.
struct EncodedFrameSerializer: MessageSerializer {
    func serialize<Bytes: GRPCContiguousBytes>(_ message: EncodedFrame) throws -> Bytes {
        Bytes(message.bytes)
    }
}

/// gRPC's deserializer for the bridge RPC: a malformed frame fails the stream that sent it
/// with `invalidArgument`, and only that stream.
struct BridgeFrameDeserializer: MessageDeserializer {
    func deserialize<Bytes: GRPCContiguousBytes>(_ serializedMessageBytes: Bytes) throws -> BridgeFrame {
        do {
            return try serializedMessageBytes.withUnsafeBytes { buffer throws(BridgeFrameError) in
                try BridgeFrame.decode(buffer)
            }
        } catch let error as BridgeFrameError {
            throw RPCError(code: .invalidArgument, message: "malformed bridge frame: \(error.rawValue)")
        }
    }
}

/// The bridge's one RPC: a bidirectional stream of frames per connected port.
enum BridgeMethod {
    static let descriptor = MethodDescriptor(fullyQualifiedService: "runloopkit.PortBridge", method: "Connect")
}
#endif

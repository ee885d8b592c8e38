import Distributed
import FoundationEssentials
import RunLoopKit

/// Sends the outcome of a call this system executed back to its caller: a RETURN with the
/// result's JSON text, a THROW with a `Codable` error, or a FAILURE (an error that is not
/// `Codable` arrives as `.remoteCallFailed` with its description). Made by the system for each
/// call it executes; used by that call's task, which suspends (never blocks a thread) while
/// the caller's reply port is full.
public struct PortResultHandler: DistributedTargetInvocationResultHandler, Sendable {
    public typealias SerializationRequirement = any Codable

    let reply: MessagePort
    let callID: UInt64
    /// The target's identifier (`RemoteCallTarget` is not `Sendable`).
    let target: String
    let coding: ValueCoding

    /// Sends the result. The call's task; one envelope, one send.
    public func onReturn<Success: Codable>(value: Success) async throws {
        var writer = EnvelopeWriter(kind: .returned, callID: callID)
        do {
            try writer.appendEncoded { (data: inout Data) throws in try coding.encode(value, into: &data) }
        } catch {
            return await send(Self.failure(callID: callID, .remoteCallFailed, "the result does not encode: \(error)"))
        }
        await send(writer)
    }

    /// Sends an empty RETURN. The call's task.
    public func onReturnVoid() async throws {
        await send(EnvelopeWriter(kind: .returned, callID: callID))
    }

    /// Sends the error: a THROW when it is `Codable`, else a FAILURE with its description (or
    /// the reason the call could not be decoded or found). The call's task.
    public func onThrow<Err: Error>(error: Err) async throws {
        await send(envelope(for: error))
    }

    /// What a thrown `error` is sent as.
    func envelope(for error: any Error) -> EnvelopeWriter {
        switch error {
        case let failure as CallDecodingFailure:
            return Self.failure(callID: callID, .remoteCallFailed, failure.description)
        case is UnknownTarget:
            return Self.failure(callID: callID, .unknownTarget, target)
        case let failure as ExecuteDistributedTargetError where failure.errorCode == .targetAccessorNotFound:
            return Self.failure(callID: callID, .unknownTarget, target)
        case let failure as ExecuteDistributedTargetError:
            return Self.failure(callID: callID, .remoteCallFailed, failure.message)
        case let codable as any Codable & Error:
            if let name = _mangledTypeName(type(of: codable)) {
                var writer = EnvelopeWriter(kind: .threw, callID: callID)
                writer.appendName(name)
                if (try? writer.appendEncoded({ (data: inout Data) throws in try coding.encode(codable, into: &data) })) != nil {
                    return writer
                }
            }
            return Self.failure(callID: callID, .remoteCallFailed, String(describing: error))
        default:
            return Self.failure(callID: callID, .remoteCallFailed, String(describing: error))
        }
    }

    static func failure(callID: UInt64, _ reason: Envelope.FailureReason, _ text: String) -> EnvelopeWriter {
        EnvelopeWriter.failure(callID: callID, reason: reason, text: text)
    }

    /// Sends the envelope; one too large for a frame becomes a FAILURE saying so. A caller that
    /// is gone (its process died, its session closed) gets nothing: there is no one to tell.
    private func send(_ writer: EnvelopeWriter) async {
        let data: Data
        do {
            data = try writer.finished()
        } catch {
            data = Self.failure(callID: callID, .remoteCallFailed, "the reply is too large: \(error)").data
        }
        try? await reply.send(msgid: 0, components: [.data(data)])
    }
}

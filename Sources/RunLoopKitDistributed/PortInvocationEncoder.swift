import Distributed
import FoundationEssentials
import RunLoopKit

/// Records a distributed call on the caller's side, straight into the CALL envelope it is sent
/// as (Protocols/distributed-envelope.md): each argument's JSON text is written into the
/// envelope's buffer as the runtime records it. The return and error types are not sent: the
/// callee reads them from the target. Made by `PortActorSystem.makeInvocationEncoder()`, used
/// by the calling task only.
public struct PortInvocationEncoder: DistributedTargetInvocationEncoder {
    public typealias SerializationRequirement = any Codable

    let coding: ValueCoding
    var writer = EnvelopeWriter.call()
    var substitutions: [String] = []

    init(coding: ValueCoding) {
        self.coding = coding
    }

    /// Records a generic substitution by its mangled name. Throws
    /// `PortActorSystemError.remoteCallFailed` for a type without one. The calling task.
    public mutating func recordGenericSubstitution<T>(_ type: T.Type) throws {
        guard let name = _mangledTypeName(type) else {
            throw PortActorSystemError.remoteCallFailed("\(type) has no mangled name to send as a generic substitution")
        }
        substitutions.append(name)
    }

    /// Encodes the argument into the envelope (JSON; integers, Bool and plain strings without
    /// JSONEncoder). Throws the encoder's `EncodingError`. The calling task; no allocation for
    /// those types.
    public mutating func recordArgument<Value: Codable>(_ argument: RemoteCallArgument<Value>) throws {
        let coding = coding
        try writer.appendArgument { (data: inout Data) throws in try coding.encode(argument.value, into: &data) }
    }

    /// Nothing is sent: the callee knows the error type from the target. Free.
    public mutating func recordErrorType<E: Error>(_ type: E.Type) throws {}

    /// Nothing is sent: the callee knows the return type from the target. Free.
    public mutating func recordReturnType<R: Codable>(_ type: R.Type) throws {}

    /// Nothing left to do: the envelope is completed when the call is sent. Free.
    public mutating func doneRecording() throws {}

    /// The CALL envelope for `target` under `callID`.
    mutating func envelope(callID: UInt64, target: RemoteCallTarget) throws(PortError) -> Data {
        writer.finishCall(callID: callID, substitutions: substitutions, target: target.identifier)
        return try writer.finished()
    }
}

import Distributed
import FoundationEssentials

/// Reads a received CALL envelope for the runtime, in place: the substitutions by their mangled
/// names, the arguments one at a time from their JSON texts. Everything it reads came from
/// another process: a name that names no type and a value that does not decode are errors
/// (`CallDecodingFailure`), answered with a FAILURE, never a crash. Made by the system for each
/// call it executes; used by that call's task only.
public struct PortInvocationDecoder: DistributedTargetInvocationDecoder, Sendable {
    public typealias SerializationRequirement = any Codable

    let envelope: Data
    let view: EnvelopeView
    let coding: ValueCoding
    let system: PortActorSystem
    private var arguments: ArgumentCursor
    private var decoded = 0

    init(envelope: Data, view: EnvelopeView, system: PortActorSystem) {
        self.envelope = envelope
        self.view = view
        self.system = system
        coding = system.coding
        arguments = view.arguments
    }

    /// The generic substitutions, in the order the caller recorded them. Throws
    /// `CallDecodingFailure` for a name that names no type of this process. The call's task.
    public mutating func decodeGenericSubstitutions() throws -> [Any.Type] {
        let names = envelope.withUnsafeBytes { bytes in
            view.substitutionRanges(in: bytes).map { String(decoding: bytes[$0], as: UTF8.self) }
        }
        return try names.map { name in
            guard let type = _typeByName(name) else {
                throw CallDecodingFailure("the generic substitution \(name) names no type of the callee's process")
            }
            return type
        }
    }

    /// The next argument, decoded as the target's parameter type. Throws `CallDecodingFailure`
    /// when the call has no more arguments or the value does not decode. The call's task; no
    /// allocation for integers, Bool and plain strings.
    public mutating func decodeNextArgument<Argument: Codable>() throws -> Argument {
        guard let range = envelope.withUnsafeBytes({ arguments.next(in: $0) }) else {
            throw CallDecodingFailure("the call has \(decoded) arguments; the target takes more")
        }
        decoded += 1
        do {
            return try coding.decode(Argument.self, from: envelope, range, system: system)
        } catch {
            throw CallDecodingFailure("argument \(decoded) does not decode as \(Argument.self): \(error)")
        }
    }

    /// Not sent: the runtime takes it from the target. Free.
    public mutating func decodeErrorType() throws -> Any.Type? { nil }

    /// Not sent: the runtime takes it from the target. Free.
    public mutating func decodeReturnType() throws -> Any.Type? { nil }
}

/// A received call that could not be decoded: answered with FAILURE `remoteCallFailed`.
struct CallDecodingFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

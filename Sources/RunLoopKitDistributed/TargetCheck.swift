import CRunLoopKit
#if canImport(Glibc)
import Glibc
#endif
import Distributed

/// Which targets a caller may have executed on a published actor. The runtime finds a target by
/// its mangled name alone and calls it on whatever actor it is given: a distributed function of
/// another type, run on this actor, reads this actor's memory as that type's (measured: a
/// crash). So only two kinds of target are admitted:
/// - a distributed function of the actor's own type: its mangled name starts with the type's,
///   and its demangled name is `<the type>.<function>` (not a function of a type nested in it);
/// - a requirement of a `@Resolvable` protocol, called through the protocol's stub type
///   (`Module.$Proto.function`), when the actor's type conforms to `Module.Proto`: the runtime
///   then runs the actor's witness (it runs the stub's own body, which traps, on an actor that
///   does not conform).
/// Generic and private actor types have no name to compare: their targets are refused
/// (`.unknownTarget`).
enum TargetCheck {
    /// Whether `identifier` may run on `actor`. The home loop's thread; demangles the
    /// identifier (callers cache the answer for the targets they admit).
    static func admits(_ identifier: String, on actor: any DistributedActor) -> Bool {
        let type = type(of: actor)
        guard let demangled = demangle(identifier), demangled.hasPrefix(thunkPrefix) else { return false }
        let signature = demangled.dropFirst(thunkPrefix.count)
        // `Context.function(…)…` or `Context.function<…>(…)…`: the context is what precedes
        // the last dot before the parameter list.
        guard let open = signature.firstIndex(where: { $0 == "(" || $0 == "<" }),
              let dot = signature[..<open].lastIndex(of: ".") else { return false }
        let context = signature[..<dot]
        guard signature.index(after: dot) < open else { return false }
        if let mangled = _mangledTypeName(type), identifier.hasPrefix("$s" + mangled),
           context == _typeName(type, qualified: true) {
            return true
        }
        return conforms(actor, toProtocolStubbedBy: context)
    }

    private static let thunkPrefix = "distributed thunk "

    /// Whether `stub` is `Module.$Proto` and `actor`'s type conforms to `Module.Proto`.
    private static func conforms(_ actor: any DistributedActor, toProtocolStubbedBy stub: Substring) -> Bool {
        let components = stub.split(separator: ".", omittingEmptySubsequences: false)
        guard components.count == 2, components[1].first == "$", components[1].count > 1,
              components.allSatisfy({ $0.utf8.allSatisfy(isIdentifierByte) && !$0.isEmpty }) else { return false }
        let module = components[0]
        let name = components[1].dropFirst()
        guard let proto = _typeByName("\(module.utf8.count)\(module)\(name.utf8.count)\(name)P") else { return false }
        // Opened, `P` is the protocol's existential type: the cast asks the runtime for the
        // conformance of the actor's type.
        func isConforming<P>(_: P.Type) -> Bool { actor is P }
        return _openExistential(proto, do: isConforming)
    }

    private static func isIdentifierByte(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "$")
    }

    /// The runtime's demangling of a symbol name, nil when it is not one.
    private static func demangle(_ name: String) -> String? {
        let text = name.utf8CString
        guard let demangled = text.withUnsafeBufferPointer({ swift_demangle($0.baseAddress!, $0.count - 1, nil, nil, 0) }) else {
            return nil
        }
        defer { free(demangled) }
        return String(cString: demangled)
    }
}

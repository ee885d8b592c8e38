// libFuzzer target: the distributed-call envelope (Protocols/distributed-envelope.md), decoded
// and then received by a callee.
//
// Input: one options byte, then the envelope. Properties checked for every input:
// - `Envelope.decode` never crashes, and agrees with `ReferenceEnvelope`, an independent reading
//   of §5 written from the specification: the same verdict, the same first failing check, the
//   same fields; an envelope it accepts re-encodes to exactly its bytes;
// - with options bit 0 set, the envelope is also sent, as the one DATA component of a message,
//   on a session this process opened by hand with an actor this process published (the whole
//   callee path: session checks, target admission, argument decoding, execution). A valid CALL
//   is answered exactly once, with its call id, and the session stays open; anything else closes
//   the session, with no answer. Nothing crashes or hangs, and the session's descriptors are all
//   that come and go.

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Distributed
import FoundationEssentials
import FuzzSupport
import RunLoopKit
import RunLoopKitDistributed

enum EnvelopeTarget {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard let options = bytes.first else { return }
        let envelope = Array(bytes.dropFirst())
        let decoded = checkDecoder(envelope)
        if options & 1 == 1 { Callee.shared.receive(envelope, decoded: decoded) }
    }

    /// Property 1: the decoder against the reference reading; returns the decoder's verdict.
    static func checkDecoder(_ bytes: [UInt8]) -> Envelope? {
        let expected = ReferenceEnvelope.decode(bytes)
        let actual = Result { () throws(EnvelopeError) in try Envelope.decode(bytes) }
        switch (actual, expected) {
        case (.failure(let reason), .failure(let wanted)):
            guard reason == wanted else { fuzzFailure("decode said \(reason), §5 says \(wanted)") }
            return nil
        case (.success(let envelope), .success(let wanted)):
            guard envelope == wanted else { fuzzFailure("decoded \(envelope), §5 reads \(wanted)") }
            let encoded: Data
            do { encoded = try envelope.encoded() } catch { fuzzFailure("an accepted envelope does not encode: \(error)") }
            guard Array(encoded) == bytes else { fuzzFailure("an accepted envelope re-encodes to other bytes") }
            return envelope
        case (.success(let envelope), .failure(let wanted)):
            fuzzFailure("decode accepted \(envelope), §5 rejects it: \(wanted)")
        case (.failure(let reason), .success):
            fuzzFailure("decode rejected a valid envelope: \(reason)")
        }
    }
}

/// §5 as written, in the plainest form: every field read byte by byte, lengths in Int.
enum ReferenceEnvelope {
    static func decode(_ b: [UInt8]) -> Result<Envelope, EnvelopeError> {
        func u16(_ at: Int) -> Int { Int(b[at]) | Int(b[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        func u64(_ at: Int) -> UInt64 { UInt64(u32(at)) | UInt64(u32(at + 4)) << 32 }
        func printable(_ range: Range<Int>) -> Bool { b[range].allSatisfy { $0 >= 0x21 && $0 <= 0x7E } }
        func text(_ range: Range<Int>) -> String { String(decoding: b[range], as: UTF8.self) }
        let n = b.count
        guard n >= 16 else { return .failure(.truncated) }
        guard n <= 0xFFFF_FFFF else { return .failure(.tooLarge) }
        guard b[0] == 0x52, b[1] == 0x4C, b[2] == 0x4B, b[3] == 0x44 else { return .failure(.badMagic) }
        guard b[4] == 1 else { return .failure(.unsupportedVersion) }
        guard (1...6).contains(b[5]) else { return .failure(.unknownKind) }
        guard b[6] == 0, b[7] == 0 else { return .failure(.reservedNotZero) }
        let id = u64(8)
        guard id != 0 else { return .failure(.badCallID) }
        switch b[5] {
        case 1, 2:
            guard n == 16 else { return .failure(.trailingBytes) }
            return .success(b[5] == 1 ? .hello(callID: id) : .welcome(callID: id))
        case 3:
            guard n >= 20 else { return .failure(.truncated) }
            let t = u16(16), g = Int(b[18]), a = Int(b[19])
            guard t >= 1, t <= 1024 else { return .failure(.badLength) }
            guard g <= 16, a <= 64 else { return .failure(.badCount) }
            var at = 20
            var arguments: [[UInt8]] = []
            for _ in 0..<a {
                guard n - at >= 4 else { return .failure(.truncated) }
                let length = u32(at)
                guard n - at - 4 >= length else { return .failure(.truncated) }
                arguments.append(Array(b[(at + 4)..<(at + 4 + length)]))
                at += 4 + length
            }
            var substitutions: [String] = []
            for _ in 0..<g {
                guard n - at >= 2 else { return .failure(.truncated) }
                let length = u16(at)
                guard length >= 1, length <= 1024 else { return .failure(.badLength) }
                guard n - at - 2 >= length else { return .failure(.truncated) }
                guard printable((at + 2)..<(at + 2 + length)) else { return .failure(.badName) }
                substitutions.append(text((at + 2)..<(at + 2 + length)))
                at += 2 + length
            }
            guard n - at >= t else { return .failure(.truncated) }
            guard printable(at..<(at + t)) else { return .failure(.badName) }
            guard at + t == n else { return .failure(.trailingBytes) }
            return .success(.call(callID: id, target: text(at..<(at + t)), substitutions: substitutions, arguments: arguments))
        case 4:
            return .success(.returned(callID: id, value: Array(b[16...])))
        case 5:
            guard n >= 18 else { return .failure(.truncated) }
            let length = u16(16)
            guard length >= 1, length <= 1024 else { return .failure(.badLength) }
            guard n - 18 >= length else { return .failure(.truncated) }
            guard printable(18..<(18 + length)) else { return .failure(.badName) }
            return .success(.threw(callID: id, errorType: text(18..<(18 + length)), value: Array(b[(18 + length)...])))
        default:
            guard n >= 20 else { return .failure(.truncated) }
            guard let reason = Envelope.FailureReason(rawValue: b[16]) else { return .failure(.unknownReason) }
            guard b[17] == 0, b[18] == 0, b[19] == 0 else { return .failure(.reservedNotZero) }
            guard n - 20 <= 4096 else { return .failure(.badLength) }
            guard let words = String(validating: b[20...], as: UTF8.self) else { return .failure(.badText) }
            return .success(.failed(callID: id, reason: reason, text: words))
        }
    }
}

#if RUNLOOPKIT_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    EnvelopeTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
@main
enum FuzzEnvelope {
    static func main() { Replay.main(EnvelopeTarget.run) }
}
#endif

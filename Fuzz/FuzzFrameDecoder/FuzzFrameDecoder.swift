// libFuzzer target: the frame decoder (Protocols/port-message-frame.md §5.2).
//
// Input: `FrameInput` (descriptor count, options, then the frame). Properties checked for
// every input:
// - `PortFrame.decode` never crashes, and agrees with `ReferenceDecoder`, an independent
//   reading of §5.2 written from the specification: the same verdict, the same first failing
//   check, the same message;
// - a frame it accepts re-encodes to exactly its bytes (the encoding is canonical, §3.4) and
//   names exactly the descriptors it was given.

import FuzzSupport
import RunLoopKit

enum FrameDecoderTarget {
    static func run(_ bytes: UnsafeRawBufferPointer) {
        guard let input = FrameInput(bytes) else { return }
        let record = Array(input.record)
        let expected = ReferenceDecoder.decode(record, descriptorCount: input.descriptorCount)
        let actual: Result<PortFrame, FrameError>
        do { actual = .success(try PortFrame.decode(record, descriptorCount: input.descriptorCount)) } catch {
            actual = .failure(error)
        }
        switch (actual, expected) {
        case (.failure(let reason), .failure(let wanted)):
            guard reason == wanted else { fuzzFailure("decode said \(reason), §5.2 says \(wanted)") }
        case (.success(let frame), .success(let wanted)):
            guard frame.msgid == wanted.msgid, frame.components == wanted.components, frame.hasReplyPort == wanted.reply,
                  frame.replyIsSendOnce == wanted.sendOnce,
                  frame.metadata?.fields.map({ [$0.key, $0.value] }) == wanted.metadata else {
                fuzzFailure("decoded \(frame), §5.2 reads \(wanted)")
            }
            guard frame.components.count(where: { if case .data = $0 { false } else { true } }) + (frame.hasReplyPort ? 1 : 0)
                    == input.descriptorCount else {
                fuzzFailure("accepted a frame naming other than its \(input.descriptorCount) descriptors")
            }
            let encoded: [UInt8]
            do { encoded = try frame.encode() } catch { fuzzFailure("an accepted frame does not encode: \(error)") }
            guard encoded == record else { fuzzFailure("an accepted frame re-encodes to other bytes") }
        case (.success(let frame), .failure(let wanted)):
            fuzzFailure("decode accepted \(frame), §5.2 rejects it: \(wanted)")
        case (.failure(let reason), .success):
            fuzzFailure("decode rejected a valid frame: \(reason)")
        }
    }
}

/// §5.2 as written, in the plainest form: every field read byte by byte, sums in 64 bits.
enum ReferenceDecoder {
    struct Message {
        var msgid: UInt32
        var components: [PortFrame.Component]
        var reply: Bool
        /// SEND_ONCE: the reply port is a send-once right.
        var sendOnce: Bool
        /// The METADATA fields as [key, value] pairs; nil without the flag.
        var metadata: [[String]]?
    }

    static func decode(_ bytes: [UInt8], descriptorCount: Int) -> Result<Message, FrameError> {
        func u16(_ at: Int) -> Int { Int(bytes[at]) | Int(bytes[at + 1]) << 8 }
        func u32(_ at: Int) -> Int { u16(at) | u16(at + 2) << 16 }
        let n = bytes.count
        guard n <= 65_536 else { return .failure(.frameTooLarge) }
        guard n >= 16 else { return .failure(.truncatedHeader) }
        guard bytes[0] == 0x52, bytes[1] == 0x4C, bytes[2] == 0x4B, bytes[3] == 0x4D else { return .failure(.badMagic) }
        guard bytes[4] == 1 else { return .failure(.unsupportedVersion) }
        // Bits 3–7 reserved; SEND_ONCE (bit 2) only with REPLY_PORT (bit 0).
        guard bytes[5] & 0xF8 == 0, bytes[5] & 5 != 4 else { return .failure(.reservedFlags) }
        let hasMetadata = bytes[5] & 2 == 2
        let count = u16(6)
        guard count <= 64 else { return .failure(.tooManyComponents) }
        let bodyLength = u32(12)
        guard n >= 16 + 8 * count, hasMetadata ? n - (16 + 8 * count) >= bodyLength : n - (16 + 8 * count) == bodyLength
        else { return .failure(.lengthMismatch) }
        // A MEMORY entry's length: 56 bits, the three bytes after the kind the high ones.
        func memoryLength(_ at: Int) -> Int { u32(at + 4) | (Int(bytes[at + 1]) | Int(bytes[at + 2]) << 8 | Int(bytes[at + 3]) << 16) << 32 }
        var sum: UInt64 = 0
        var descriptors = 0
        for entry in 0..<count {
            let at = 16 + 8 * entry
            guard bytes[at] >= 1 && bytes[at] <= 3 else { return .failure(.badComponentKind) }
            if bytes[at] == 3 {
                guard memoryLength(at) != 0 else { return .failure(.memoryLength) }
                descriptors += 1
                continue
            }
            guard bytes[at + 1] == 0, bytes[at + 2] == 0, bytes[at + 3] == 0 else { return .failure(.reservedBytes) }
            guard bytes[at] == 1 || u32(at + 4) == 0 else { return .failure(.portLength) }
            if bytes[at] == 2 { descriptors += 1 }
            sum += UInt64(u32(at + 4))
        }
        guard sum == UInt64(bodyLength) else { return .failure(.lengthMismatch) }
        let reply = bytes[5] & 1 == 1
        let sendOnce = bytes[5] & 4 == 4
        guard descriptorCount == descriptors + (reply ? 1 : 0) else { return .failure(.descriptorCountMismatch) }
        // §3.6, F11: count 1…16, then key (1…256) and value (0…4096) lengths and UTF-8 bytes.
        var metadata: [[String]]?
        if hasMetadata {
            var at = 16 + 8 * count + bodyLength
            func string(_ limits: ClosedRange<Int>) -> String? {
                guard n - at >= 2 else { return nil }
                let length = u16(at)
                at += 2
                guard limits.contains(length), n - at >= length else { return nil }
                defer { at += length }
                return String(validating: bytes[at..<at + length], as: UTF8.self)
            }
            guard n - at >= 2, (1...16).contains(u16(at)) else { return .failure(.badMetadata) }
            let fields = u16(at)
            at += 2
            var pairs: [[String]] = []
            for _ in 0..<fields {
                guard let key = string(1...256), let value = string(0...4096) else { return .failure(.badMetadata) }
                pairs.append([key, value])
            }
            guard at == n else { return .failure(.badMetadata) }
            metadata = pairs
        }
        var components: [PortFrame.Component] = []
        var data = 16 + 8 * count
        for entry in 0..<count {
            let at = 16 + 8 * entry
            if bytes[at] == 2 {
                components.append(.port)
            } else if bytes[at] == 3 {
                components.append(.memory(memoryLength(at)))
            } else {
                components.append(.data(Array(bytes[data..<data + u32(at + 4)])))
                data += u32(at + 4)
            }
        }
        return .success(Message(msgid: UInt32(u32(8)), components: components, reply: reply, sendOnce: sendOnce,
                                metadata: metadata))
    }
}

#if RUNLOOPKIT_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FrameDecoderTarget.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
@main
enum FuzzFrameDecoder {
    static func main() { Replay.main(FrameDecoderTarget.run) }
}
#endif

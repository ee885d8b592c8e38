// Test 1: every vector of Protocols/vectors decodes (or is rejected) exactly as written, and
// the valid ones re-encode to the same bytes. The C peer's independent decoder is held to the
// same vectors.

import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// One `NAME.vector` file (format: Protocols/port-message-frame.md §9).
struct FrameVector: CustomStringConvertible, Sendable {
    enum Expectation: Equatable, Sendable {
        case ok(msgid: UInt32, reply: Reply, components: [PortFrame.Component], metadata: MessageMetadata?)
        case error(FrameError)
    }

    /// The `reply:` line: REPLY_PORT clear, set, or set with SEND_ONCE.
    enum Reply: String, Sendable {
        case absent = "false", sendRight = "true", sendOnce = "send-once"
    }

    var name: String
    var bytes: [UInt8] = []
    var descriptors = 0
    var expectation: Expectation

    var description: String { name }

    struct ParseError: Error, CustomStringConvertible {
        var description: String
    }

    static func hexBytes(_ text: Substring) throws -> [UInt8] {
        let digits = text.filter { !$0.isWhitespace }
        guard digits.count % 2 == 0 else { throw ParseError(description: "odd number of hex digits") }
        var bytes: [UInt8] = []
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            guard let byte = UInt8(digits[index..<next], radix: 16) else {
                throw ParseError(description: "not hex: \(digits[index..<next])")
            }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    static func repeated(_ arguments: [Substring]) throws -> [UInt8] {
        guard arguments.count == 2, arguments[0].count == 2, let byte = UInt8(arguments[0], radix: 16),
              let count = Int(arguments[1]), count >= 0 else {
            throw ParseError(description: "expected `BB COUNT`, got \(arguments)")
        }
        return [UInt8](repeating: byte, count: count)
    }

    init(name: String, text: String) throws {
        self.name = name
        var expect: Substring?
        var msgid: UInt32?
        var reply: Reply?
        var components: [PortFrame.Component] = []
        var fields: [MessageMetadata.Field] = []
        for (number, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = rawLine.trimmingPrefix { $0.isWhitespace }
            if line.isEmpty || line.hasPrefix("#") { continue }
            guard let colon = line.firstIndex(of: ":") else {
                throw ParseError(description: "\(name):\(number + 1): no directive")
            }
            let key = line[..<colon]
            let argument = line[line.index(after: colon)...]
            let words = argument.split(whereSeparator: \.isWhitespace)
            switch key {
            case "frame": bytes += try Self.hexBytes(argument)
            case "repeat": bytes += try Self.repeated(words)
            case "descriptors":
                guard words.count == 1, let count = Int(words[0]) else { throw ParseError(description: "\(name): descriptors") }
                descriptors = count
            case "expect": expect = argument.drop { $0.isWhitespace }
            case "msgid":
                guard words.count == 1, let value = UInt32(words[0]) else { throw ParseError(description: "\(name): msgid") }
                msgid = value
            case "reply":
                guard words.count == 1, let value = Reply(rawValue: String(words[0])) else {
                    throw ParseError(description: "\(name): reply")
                }
                reply = value
            case "component":
                switch words.first {
                case "port" where words.count == 1: components.append(.port)
                case "data": components.append(.data(try Self.hexBytes(argument.drop { $0.isWhitespace }.dropFirst(4))))
                case "data-repeat": components.append(.data(try Self.repeated(Array(words.dropFirst()))))
                case "memory" where words.count == 2:
                    guard let length = Int(words[1]) else { throw ParseError(description: "\(name):\(number + 1): memory length") }
                    components.append(.memory(length))
                default: throw ParseError(description: "\(name):\(number + 1): bad component")
                }
            case "metadata":
                guard words.count == 2 else { throw ParseError(description: "\(name):\(number + 1): bad metadata") }
                let value = words[1] == "-" ? [] : try Self.hexBytes(words[1])
                fields.append(MessageMetadata.Field(key: String(decoding: try Self.hexBytes(words[0]), as: UTF8.self),
                                                    value: String(decoding: value, as: UTF8.self)))
            default:
                throw ParseError(description: "\(name):\(number + 1): unknown directive \(key)")
            }
        }
        guard let expect else { throw ParseError(description: "\(name): no expect line") }
        let parts = expect.split(whereSeparator: \.isWhitespace)
        if parts == ["ok"] {
            guard let msgid, let reply else { throw ParseError(description: "\(name): ok vector without msgid/reply") }
            expectation = .ok(msgid: msgid, reply: reply, components: components,
                              metadata: fields.isEmpty ? nil : MessageMetadata(fields))
        } else if parts.count == 2, parts[0] == "error", let reason = FrameError(rawValue: String(parts[1])) {
            guard components.isEmpty, fields.isEmpty, msgid == nil, reply == nil else {
                throw ParseError(description: "\(name): an error vector describes no message")
            }
            expectation = .error(reason)
        } else {
            throw ParseError(description: "\(name): bad expect line `\(expect)`")
        }
    }

    static func loadAll() throws -> [FrameVector] {
        guard let directory = opendir(vectorsFolder) else {
            throw ParseError(description: "cannot open \(vectorsFolder)")
        }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".vector") { names.append(name) }
        }
        closedir(directory)
        return try names.sorted().map { name in
            try FrameVector(name: String(name.dropLast(".vector".count)), text: readText(vectorsFolder + "/" + name))
        }
    }
}

func readText(_ path: String) throws -> String {
    guard let file = fopen(path, "r") else { throw FrameVector.ParseError(description: "cannot read \(path)") }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = fread(&chunk, 1, chunk.count, file)
        if n <= 0 { break }
        bytes += chunk[0..<n]
    }
    return String(decoding: bytes, as: UTF8.self)
}

let allVectors: [FrameVector] = (try? FrameVector.loadAll()) ?? []

@Suite("Protocol test vectors")
struct VectorTests {
    @Test("the vector set covers the protocol")
    func coverage() throws {
        let vectors = try FrameVector.loadAll()
        let valid = vectors.filter { if case .ok = $0.expectation { true } else { false } }
        #expect(valid.count >= 12, "at least a dozen valid vectors")
        // One invalid vector per reason that decode can produce; the kernel-level reasons are
        // covered by MalformedFrameTests instead.
        let kernelLevel: Set<FrameError> = [.truncated, .descriptorsTruncated, .descriptorNotAPort, .unexpectedControlMessage,
                                            .descriptorNotMemory, .memoryNotSealed, .memoryTooSmall]
        let covered = Set(vectors.compactMap { if case .error(let reason) = $0.expectation { reason } else { nil } })
        for reason in FrameError.allCases where !kernelLevel.contains(reason) {
            #expect(covered.contains(reason), "no vector for \(reason)")
        }
        #expect(covered.isDisjoint(with: kernelLevel), "kernel-level reasons cannot be decode results")
    }

    @Test("each vector decodes exactly as written", arguments: allVectors)
    func decode(_ vector: FrameVector) throws {
        switch vector.expectation {
        case .ok(let msgid, let reply, let components, let metadata):
            let decoded = try PortFrame.decode(vector.bytes, descriptorCount: vector.descriptors)
            #expect(decoded.msgid == msgid)
            #expect(decoded.hasReplyPort == (reply != .absent))
            #expect(decoded.replyIsSendOnce == (reply == .sendOnce))
            #expect(decoded.components == components)
            #expect(decoded.metadata == metadata)
            #expect(decoded.descriptorCount == vector.descriptors)
            // The encoding is canonical: the expected message encodes to the vector's bytes.
            let expected = PortFrame(msgid: msgid, components: components, hasReplyPort: reply != .absent,
                                     replyIsSendOnce: reply == .sendOnce, metadata: metadata)
            let encoded = try expected.encode()
            #expect(encoded.count == vector.bytes.count)
            #expect(encoded == vector.bytes, "re-encoding differs")
        case .error(let reason):
            #expect(throws: reason) { try PortFrame.decode(vector.bytes, descriptorCount: vector.descriptors) }
        }
    }

    @Test("the vector folder is found and complete")
    func loaded() {
        #expect(allVectors.count >= 40, "vectors found in \(vectorsFolder): \(allVectors.count)")
    }

    @Test("the encoder refuses what the spec forbids sending")
    func encoderLimits() {
        let limit = MessagePort.maximumFrameSize
        #expect(limit == 65536)
        #expect(throws: PortError.messageTooLarge(limit: 65536)) {
            try PortFrame(msgid: 1, components: [.data([UInt8](repeating: 0, count: limit - 16 - 8 + 1))], hasReplyPort: false).encode()
        }
        #expect(throws: PortError.messageTooLarge(limit: 65536)) {
            try PortFrame(msgid: 1, components: [PortFrame.Component](repeating: .port, count: 65), hasReplyPort: false).encode()
        }
        #expect(throws: Never.self) {
            try PortFrame(msgid: 1, components: [.data([UInt8](repeating: 0, count: limit - 16 - 8))], hasReplyPort: false).encode()
        }
    }

    @Test("a proxy writes exactly the frame the codec encodes, on its one-DATA path and its general one")
    func proxyWritesCanonicalFrames() throws {
        let (mine, theirs) = rawSeqPacketPair()
        defer { close(mine) }
        let proxy = try MessagePort(sendRight: theirs)
        defer { proxy.invalidate() }
        let replies = try MessagePort()
        defer { replies.invalidate() }
        let long = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let cases: [(msgid: UInt32, components: [MessagePort.Message.Component], reply: MessagePort?, frame: [UInt8])] = [
            (1, [.data(Data([1, 2, 3]))], nil, frame(msgid: 1, [.data([1, 2, 3])])),
            (2, [.data(Data(long))], nil, frame(msgid: 2, [.data(long)])),
            (3, [.data(Data())], nil, frame(msgid: 3, [.data([])])),
            (4, [], nil, frame(msgid: 4)),
            (5, [.data(Data([9])), .data(Data(long))], nil, frame(msgid: 5, [.data([9]), .data(long)])),
            (6, [.data(Data([4, 5]))], replies, frame(msgid: 6, [.data([4, 5])], reply: true)),
            (0xFFFF_FFFF, [.data(Data(long))], replies, frame(msgid: 0xFFFF_FFFF, [.data(long)], reply: true)),
        ]
        for sent in cases {
            try proxy.send(msgid: sent.msgid, components: sent.components, from: sent.reply, timeout: waitLimit)
            var buffer = [UInt8](repeating: 0, count: MessagePort.maximumFrameSize + 1)
            // recv(2) takes no descriptors: the kernel closes the reply port's copy.
            let length = buffer.withUnsafeMutableBytes { recv(mine, $0.baseAddress, $0.count, 0) }
            #expect(length == sent.frame.count, "msgid \(sent.msgid)")
            #expect(Array(buffer.prefix(max(length, 0))) == sent.frame, "msgid \(sent.msgid)")
        }
    }

    @Test("the independent C decoder agrees with every vector")
    func cDecoderAgrees() throws {
        let child = try ChildProcess(portPeerC, ["vectors", vectorsFolder])
        let exit = child.finish(timeout: .seconds(30))
        #expect(exit == .exited(0), "PortPeerC vectors: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("vectors: \(allVectors.count) checked, 0 failed"), "\(child.output)")
    }
}

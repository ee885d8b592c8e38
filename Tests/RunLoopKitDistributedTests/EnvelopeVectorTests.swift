// Protocols/distributed-envelope.md §7: every vector decodes to its expectation, and the valid
// ones encode back to their bytes.

import FoundationEssentials
import Glibc
import PackageTestSupport
import RunLoopKit
import RunLoopKitDistributed
import Testing

@Suite("Distributed envelope vectors")
struct EnvelopeVectorTests {
    static let folder = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")) + "/Protocols/vectors/distributed"

    struct Vector: CustomStringConvertible, Sendable {
        let name: String
        let envelope: [UInt8]
        let expect: String
        var description: String { name }
    }

    static let vectors: [Vector] = {
        guard let directory = opendir(folder) else { return [] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name.hasSuffix(".vector") { names.append(name) }
        }
        return names.sorted().compactMap { name in
            guard let text = readText(folder + "/" + name) else { return nil }
            var envelope: [UInt8] = []
            var expect = ""
            for line in text.split(separator: "\n") {
                if line.hasPrefix("envelope:") {
                    envelope += line.dropFirst(9).split(separator: " ").compactMap { UInt8($0, radix: 16) }
                } else if line.hasPrefix("repeat:") {
                    let fields = line.dropFirst(7).split(separator: " ")
                    if fields.count == 2, let byte = UInt8(fields[0], radix: 16), let count = Int(fields[1]) {
                        envelope += [UInt8](repeating: byte, count: count)
                    }
                } else if line.hasPrefix("expect: ") {
                    expect = String(line.dropFirst(8))
                }
            }
            return Vector(name: name, envelope: envelope, expect: expect)
        }
    }()

    @Test("the vectors are there")
    func present() {
        #expect(Self.vectors.count == 55)
        #expect(Self.vectors.allSatisfy { !$0.expect.isEmpty })
    }

    @Test("decode, and encode the valid ones byte for byte", arguments: vectors)
    func vector(_ vector: Vector) throws {
        switch Result(catching: { () throws(EnvelopeError) in try Envelope.decode(vector.envelope) }) {
        case .failure(let error):
            #expect(vector.expect == "error \(error.rawValue)")
        case .success(let envelope):
            #expect(Self.describe(envelope) == vector.expect)
            #expect(Array(try envelope.encoded()) == vector.envelope)
        }
    }

    static func describe(_ envelope: Envelope) -> String {
        func hex(_ bytes: [UInt8]) -> String {
            bytes.isEmpty ? "-" : bytes.map { String($0, radix: 16, uppercase: true).leftPadded }.joined()
        }
        switch envelope {
        case .hello(let id): return "hello \(id)"
        case .welcome(let id): return "welcome \(id)"
        case .call(let id, let target, let substitutions, let arguments):
            let names = substitutions.isEmpty ? "-" : substitutions.joined(separator: ",")
            let values = arguments.isEmpty ? "-" : arguments.map(hex).joined(separator: ",")
            return "call \(id) \(target) \(names) \(values)"
        case .returned(let id, let value): return "return \(id) \(hex(value))"
        case .threw(let id, let type, let value): return "throw \(id) \(type) \(hex(value))"
        case .failed(let id, let reason, let text):
            let names: [Envelope.FailureReason: String] = [.actorNotFound: "actorNotFound", .unknownTarget: "unknownTarget",
                                                           .remoteCallFailed: "remoteCallFailed"]
            return "failure \(id) \(names[reason]!) \(hex(Array(text.utf8)))"
        }
    }
}

extension String {
    fileprivate var leftPadded: String { count == 1 ? "0" + self : self }
}


// §3.29: the vectors of Protocols/vectors/named (named-ports.md §8) — addresses derived and
// handshake records decoded and encoded byte for byte — by the Swift implementation and by
// the independent C peer.

import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// One named-port vector file: its directives, in order.
struct NamedVector: CustomStringConvertible, Sendable {
    var name: String
    var directives: [(key: String, value: String)]
    var description: String { name }

    func value(_ key: String) -> String? { directives.first { $0.key == key }?.value }

    func bytes(_ key: String) throws -> [UInt8] {
        try directives.filter { $0.key == key }.flatMap { try FrameVector.hexBytes(Substring($0.value)) }
    }

    static func load() throws -> [NamedVector] {
        let folder = vectorsFolder + "/named"
        guard let directory = opendir(folder) else { throw FrameVector.ParseError(description: "no \(folder)") }
        defer { closedir(directory) }
        var vectors: [NamedVector] = []
        while let entry = readdir(directory) {
            let file = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard file.hasSuffix(".vector") else { continue }
            let text = try String(contentsOfFile: folder + "/" + file, encoding: .utf8)
            var directives: [(String, String)] = []
            for line in text.split(separator: "\n") where !line.hasPrefix("#") {
                guard let colon = line.firstIndex(of: ":") else { continue }
                let value = line[line.index(after: colon)...].drop { $0 == " " }
                directives.append((String(line[..<colon]), String(value)))
            }
            vectors.append(NamedVector(name: String(file.dropLast(7)), directives: directives))
        }
        return vectors.sorted { $0.name < $1.name }
    }
}

let namedVectors: [NamedVector] = (try? NamedVector.load()) ?? []

@Suite("§3.29 named-port vectors")
struct NamedVectorTests {
    @Test("§3.29 there are address and handshake vectors")
    func vectorsExist() {
        #expect(namedVectors.count { $0.name.hasPrefix("address-") } >= 5)
        #expect(namedVectors.count { $0.value("record") != nil } >= 15)
    }

    @Test("§3.29 address vectors: the name's address in the uid's scope, byte for byte",
          arguments: namedVectors.filter { $0.name.hasPrefix("address-") })
    func address(_ vector: NamedVector) throws {
        let nameText: String
        if let repeated = vector.value("name-repeat") {
            let parts = repeated.split(separator: " ")
            nameText = String(repeating: String(parts[0]), count: Int(parts[1])!)
        } else {
            nameText = try #require(vector.value("name"))
        }
        let uid = try #require(vector.value("uid").flatMap { UInt32($0) })
        let name = try PortName(nameText)
        let expected = try vector.bytes("address")
        #expect(name.address(uid: uid) == expected)
        #expect(name.scope(ofAddress: expected) == uid)
    }

    @Test("§3.29 handshake vectors: decoded (or rejected) as written; the valid ones re-encode to the same bytes",
          arguments: namedVectors.filter { $0.value("record") != nil })
    func handshake(_ vector: NamedVector) throws {
        let bytes = try vector.bytes("record")
        let side: Handshake.Expected = vector.value("side") == "owner" ? .hello : .answer
        let expect = try #require(vector.value("expect"))
        if expect.hasPrefix("error ") {
            let reason = try #require(HandshakeError(rawValue: String(expect.dropFirst(6))))
            #expect(throws: reason) { _ = try Handshake.decode(bytes, expecting: side) }
            return
        }
        let expected: Handshake = switch expect {
        case "welcome": .welcome
        case "denied": .denied
        case "unknown-name": .unknownName
        case "too-many-connections": .tooManyConnections
        default: .hello(name: Array(expect.dropFirst(6).utf8))
        }
        #expect(try Handshake.decode(bytes, expecting: side) == expected)
        #expect(expected.encode() == bytes)
    }

    @Test("§3.29 the C peer derives the same addresses and decodes the same handshake records")
    func cPeerVectors() throws {
        let child = try ChildProcess(portPeerC, ["named-vectors", vectorsFolder + "/named"])
        #expect(child.finish() == .exited(0), "\(child.output)")
        #expect(child.output.contains("named vectors: \(namedVectors.count) passed"), "\(child.output)")
    }

    @Test("§3.29 the C peer connects to a Swift named port by name, is admitted, and gets its request answered")
    func cPeerConnects() throws {
        let name = uniqueName("c-peer")
        let receiver = try ReceivingPort(publishedAs: name) { message in
            try? message.replyPort?.send(msgid: message.msgid + 1, components: [.data(Data("named hello".utf8))],
                                         timeout: waitLimit)
        }
        defer { receiver.stop() }
        let child = try ChildProcess(portPeerC, ["connect", name, "named hello"])
        #expect(child.finish() == .exited(0), "\(child.output)")
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender == MessagePort.Sender(pid: child.pid, uid: geteuid(), gid: getegid()))
    }
}

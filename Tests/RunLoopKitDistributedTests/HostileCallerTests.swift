// Anything another process sends is hostile: envelopes written by hand, on a session opened by
// hand, to a DistributedPeer's published actors. A malformed envelope costs its sender the
// session (its connection), a well-formed call the callee cannot decode or find is answered
// with a FAILURE; the callee's process serves everyone else throughout.

import Distributed
import DistributedPeer
import FoundationEssentials
import Glibc
import RunLoopKit
import RunLoopKitDistributed
import Testing

/// A session with a published actor, opened by hand (distributed-envelope.md §2): HELLO on the
/// published port with a reply port, WELCOME back with the session port. Both ports are on a
/// resident thread's loop, which collects the replies and notices the session's hang-up.
final class RawSession: Sendable {
    let thread = ResidentThread(name: "raw session")
    let replies: MessagePort
    let session: MessagePort
    private let received = Locked<[MessagePort.Message]>([])

    init(_ name: String) async throws {
        let entrance = try MessagePort.connect(to: name)
        defer { entrance.invalidate() }
        replies = try MessagePort()
        replies.setHandler { [received] message in received.withLock { $0.append(message) } }
        thread.runLoop.add(replies, forMode: .default)
        try entrance.send(msgid: 0, components: [.data(try Envelope.hello(callID: 1).encoded())], from: replies,
                          timeout: waitLimit)
        let deadline = ContinuousClock.now + waitLimit
        var welcome: MessagePort.Message?
        while welcome == nil, ContinuousClock.now < deadline {
            welcome = received.withLock { $0.isEmpty ? nil : $0.removeFirst() }
            if welcome == nil { try await Task.sleep(for: .milliseconds(2)) }
        }
        let answer = try #require(welcome)
        #expect(try Envelope.decode(answer.data(at: 0) ?? Data()) == .welcome(callID: 1))
        session = try #require(answer.port(at: 1))
        // On a loop, the proxy notices its owner hanging up: it is invalidated then.
        thread.runLoop.add(session, forMode: .default)
    }

    deinit {
        session.invalidate()
        replies.invalidate()
        thread.stop()
    }

    func send(_ envelope: Data, components extra: [MessagePort.Message.Component] = [],
              replyPort: MessagePort? = nil) throws {
        try session.send(msgid: 0, components: [.data(envelope)] + extra, from: replyPort, timeout: waitLimit)
    }

    /// The next reply's envelope, nil if none came within the hang guard.
    func reply() async -> Envelope? {
        let deadline = ContinuousClock.now + waitLimit
        while ContinuousClock.now < deadline {
            if let message = received.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                return try? Envelope.decode(message.data(at: 0) ?? Data())
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return nil
    }

    /// Whether the callee closed the session (its port hung up) within the hang guard.
    func closedByCallee() async -> Bool {
        let deadline = ContinuousClock.now + waitLimit
        while session.isValid, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(2)) }
        return !session.isValid
    }
}

/// `Store.twice(_:)` and `Store.echo(_:)` of DistributedPeer, as callers name them.
let twiceTarget = "$s15DistributedPeer5StoreC5twiceyS2iYaKFTE"
let echoTarget = "$s15DistributedPeer5StoreC4echoyxxYaKSeRzSERzlFTE"

func callEnvelope(_ id: UInt64, target: String = twiceTarget, substitutions: [String] = [], _ arguments: [String]) throws -> Data {
    try Envelope.call(callID: id, target: target, substitutions: substitutions,
                      arguments: arguments.map { Array($0.utf8) }).encoded()
}

@Suite("Distributed actors: hostile callers", .timeLimit(.minutes(3)))
struct HostileCallerTests {
    static let malformed: [(String, [UInt8])] = {
        let valid = Array((try? callEnvelope(7, ["21"])) ?? Data())
        var badVersion = valid
        badVersion[4] = 2
        var lengthPastEnd = valid
        lengthPastEnd[20] = 0xFF
        var longTarget = valid
        longTarget[16] = 0x01
        longTarget[17] = 0x04
        var tooManyArguments = valid
        tooManyArguments[19] = 65
        // Larger than a frame carries (so it arrives as sealed memory), with an argument that
        // claims more than that.
        let largest = Array(valid[0..<20]) + [0xFF, 0xFF, 0xFF, 0xFF]
            + [UInt8](repeating: UInt8(ascii: "1"), count: 100_000)
        return [
            ("garbage", Array("not an envelope at all".utf8)),
            ("empty", []),
            ("truncated header", Array(valid[0..<11])),
            ("truncated call", Array(valid.dropLast(3))),
            ("an argument length past the end", lengthPastEnd),
            ("version 2", badVersion),
            ("trailing bytes", valid + [0]),
            ("a target length of 1,025 bytes", longTarget),
            ("65 arguments", tooManyArguments),
            ("an envelope in sealed memory, with an argument longer than it", largest),
            ("a HELLO on the session", Array((try? Envelope.hello(callID: 3).encoded()) ?? Data())),
            ("a RETURN on the session", Array((try? Envelope.returned(callID: 3, value: Array("1".utf8)).encoded()) ?? Data())),
        ]
    }()

    @Test("a garbage, truncated or oversized envelope costs its sender the session, never the callee's process", arguments: 0..<malformed.count)
    func malformedEnvelopeClosesTheSession(_ index: Int) async throws {
        let (what, bytes) = Self.malformed[index]
        let prefix = uniquePrefix("malformed")
        let peer = try await PeerProcess.serving(prefix)
        let raw = try await RawSession(prefix + ".store")
        try raw.send(Data(bytes))
        #expect(await raw.closedByCallee(), "\(what): the session stayed open")
        try await expectServing(prefix)
        #expect(peer.output.contains("closed a session of \(prefix).store"), "\(what): \(peer.output)")
    }

    @Test("a message of other components than one envelope costs its sender the session")
    func extraComponentsCloseTheSession() async throws {
        let prefix = uniquePrefix("components")
        let peer = try await PeerProcess.serving(prefix)
        let extraData = try await RawSession(prefix + ".store")
        try extraData.send(try callEnvelope(1, ["1"]), components: [.data(Data([1]))])
        #expect(await extraData.closedByCallee())
        let withPort = try await RawSession(prefix + ".store")
        let stray = try MessagePort()
        defer { stray.invalidate() }
        try withPort.send(try callEnvelope(1, ["1"]), replyPort: stray)
        #expect(await withPort.closedByCallee())
        try await expectServing(prefix)
        withExtendedLifetime(peer) {}
    }

    @Test("a well-formed call the callee cannot find or decode is answered with a FAILURE; the session stays open")
    func undecodableCallsAreAnswered() async throws {
        let prefix = uniquePrefix("failures")
        let peer = try await PeerProcess.serving(prefix)
        let raw = try await RawSession(prefix + ".store")
        try raw.send(try callEnvelope(1, target: "$s3Foo3BarC3bazyyYaKFTE", []))
        // The text is the identifier as sent: the callee demangles nothing a caller names (the
        // runtime would keep every name it made).
        #expect(await raw.reply() == .failed(callID: 1, reason: .unknownTarget, text: "$s3Foo3BarC3bazyyYaKFTE"))
        try raw.send(try callEnvelope(2, ["\"twenty-one\""]))
        guard case .failed(2, .remoteCallFailed, let text)? = await raw.reply() else {
            Issue.record("no FAILURE for an argument that does not decode")
            return
        }
        #expect(text.hasPrefix("argument 1 does not decode as Int"))
        try raw.send(try callEnvelope(3, []))
        #expect(await raw.reply() == .failed(callID: 3, reason: .remoteCallFailed,
                                              text: "the call has 0 arguments; the target takes more"))
        try raw.send(try callEnvelope(4, target: echoTarget, substitutions: ["9NoSuchOne3ArfV"], ["1"]))
        #expect(await raw.reply() == .failed(callID: 4, reason: .remoteCallFailed,
                                              text: "the generic substitution 9NoSuchOne3ArfV names no type of the callee's process"))
        // The session still carries calls.
        try raw.send(try callEnvelope(5, ["21"]))
        #expect(await raw.reply() == .returned(callID: 5, value: Array("42".utf8)))
        try raw.send(try callEnvelope(6, target: echoTarget, substitutions: ["SS"], ["\"x\""]))
        #expect(await raw.reply() == .returned(callID: 6, value: Array("\"x\"".utf8)))
        withExtendedLifetime(peer) {}
    }

    @Test("a published port drops what is not a HELLO, and the name keeps serving")
    func publishedPortDropsNonHellos() async throws {
        let prefix = uniquePrefix("entrance")
        let peer = try await PeerProcess.serving(prefix)
        let entrance = try MessagePort.connect(to: prefix + ".store")
        defer { entrance.invalidate() }
        let replies = try MessagePort()
        defer { replies.invalidate() }
        try entrance.send(msgid: 0, components: [.data(Data("junk".utf8))], timeout: waitLimit)
        try entrance.send(msgid: 0, components: [.data(Data("junk".utf8))], from: replies, timeout: waitLimit)
        try entrance.send(msgid: 0, components: [.data(try callEnvelope(1, ["1"]))], from: replies, timeout: waitLimit)
        try await expectServing(prefix)
        #expect(peer.output.contains("dropped a message that is not a HELLO on \(prefix).store"))
        #expect(peer.output.contains("dropped a message without a reply port on \(prefix).store"))
    }

    @Test("§3.43 a 16 MiB argument and a 16 MiB result round-trip between processes")
    func largeArgumentAndResult() async throws {
        let prefix = uniquePrefix("large")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789".utf8)
        // 2 MiB under a sanitizer (still sealed memory), which instruments every byte made here.
        let size = getenv("RUNLOOPKIT_SANITIZER") != nil ? 2 << 20 : 16 << 20
        let large = String(decoding: (0..<size).map { alphabet[$0 % 37 % alphabet.count] }, as: UTF8.self)
        #expect(try await store.echo(large) == large)
        try await store.put("k", large)
        #expect(try await store.get("k") == large)
        #expect(try await store.twice(5) == 10)
        withExtendedLifetime(peer) {}
    }

    /// A regular call through a fresh system is answered: the callee's process still serves.
    private func expectServing(_ prefix: String) async throws {
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(try await store.twice(8) == 16)
    }
}

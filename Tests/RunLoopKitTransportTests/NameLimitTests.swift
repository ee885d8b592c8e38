// Guarantees §3.35: `NameLimits.connectionsPerUser` — a uid holding that many open connections to a
// name gets `.tooManyConnections` from `connect`; closing one admits the next; other uids are
// unaffected (a PortPeer child drops to nobody). The answer is the handshake's
// TOO_MANY_CONNECTIONS (Protocols/named-ports.md §4), which the C peer understands too.

import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

extension ReceivingPort {
    /// A receiving port published as `name` with `limits`.
    convenience init(publishedAs name: String, access: MessagePort.Access = .sameUser, limits: MessagePort.NameLimits) throws {
        try self.init(name: "limited")
        try port.publish(as: name, access: access, limits: limits)
    }
}

@Suite("§3.35 connections per user")
struct NameLimitTests {
    @Test("§3.35 a uid holding connectionsPerUser connections gets .tooManyConnections; closing one admits the next; the refusal is reported with who connected")
    func limitPerUser() throws {
        let name = uniqueName("limit")
        let receiver = try ReceivingPort(publishedAs: name, limits: .init(connectionsPerUser: 2))
        defer { receiver.stop() }
        var held = [try MessagePort.connect(to: name), try MessagePort.connect(to: name)]
        // The owner adds a connection on its loop right after its WELCOME.
        #expect(waitUntil { receiver.port.connectionCount == 2 })
        #expect(throws: PortError.tooManyConnections) { _ = try MessagePort.connect(to: name) }
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .tooManyConnections)
        #expect(report.connector == MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid()))
        #expect(report.connector?.process == (try PinnedProcess(pid: getpid())))

        held.removeFirst().invalidate()
        #expect(waitUntil { receiver.port.connectionCount == 1 })
        held.append(try MessagePort.connect(to: name))
        for (index, proxy) in held.enumerated() { try proxy.send(msgid: UInt32(index), timeout: waitLimit) }
        #expect(receiver.waitForMessages(2) != nil)
        #expect(throws: PortError.tooManyConnections) { _ = try MessagePort.connect(to: name) }
    }

    @Test("§3.35 other uids are unaffected: a child that setuid()s to nobody connects while this uid is at its limit",
          .enabled(if: geteuid() == 0, "needs root to run a child as nobody"))
    func otherUsersUnaffected() throws {
        let name = uniqueName("limit-others")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone, limits: .init(connectionsPerUser: 1))
        defer { receiver.stop() }
        let mine = try MessagePort.connect(to: name)
        defer { mine.invalidate() }
        #expect(waitUntil { receiver.port.connectionCount == 1 })
        #expect(throws: PortError.tooManyConnections) { _ = try MessagePort.connect(to: name) }
        let child = try peer(["connect-name", name], asNobody: true)
        #expect(child.finish() == .exited(0))
        #expect(child.output.contains("connected"), "\(child.output)")
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender?.uid == nobody)
    }

    @Test("§3.35 the independent C peer reads TOO_MANY_CONNECTIONS (named-ports.md §4.1)")
    func cPeerAnswer() throws {
        let name = uniqueName("limit-c")
        let receiver = try ReceivingPort(publishedAs: name, limits: .init(connectionsPerUser: 1))
        defer { receiver.stop() }
        let mine = try MessagePort.connect(to: name)
        defer { mine.invalidate() }
        #expect(waitUntil { receiver.port.connectionCount == 1 })
        let child = try ChildProcess(portPeerC, ["connect", name, "unused"])
        #expect(child.finish() == .exited(1))
        #expect(child.output.contains("too-many-connections"), "\(child.output)")
    }

    @Test("§3.35/§3.62 NameLimits.default allows at most 1,024 connections per user, fitted to the descriptor budget (a limit below 1: PreconditionFailureTests)")
    func defaults() {
        #expect((1...1024).contains(MessagePort.NameLimits.default.connectionsPerUser))
        #expect(MessagePort.NameLimits(connectionsPerUser: 3) != .default)
    }
}

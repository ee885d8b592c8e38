// Guarantees §3.50: the first send to a request's reply port consumes the right; any later send
// throws .invalidPort, even one made before the first reply was delivered.

import FoundationEssentials
import Glibc
import Synchronization
import Testing
@testable import RunLoopKit

/// A responder that replies twice, back to back, and records what each send returned.
private func twiceReplyingPort(_ outcomes: Shared<[PortError?]>) throws -> ReceivingPort {
    try ReceivingPort(name: "twice") { message in
        var results: [PortError?] = []
        for attempt in 0..<2 {
            do throws(PortError) {
                try message.replyPort?.send(msgid: message.msgid + UInt32(attempt), timeout: waitLimit)
                results.append(nil)
            } catch {
                results.append(error)
            }
        }
        outcomes.value = results
    }
}

@Suite("§3.50 send-once reply ports")
struct SendOnceReplyTests {
    @Test("§3.50 synchronous sendRequest: the responder's second reply, sent right after the first, throws .invalidPort")
    func secondReplyThrowsSynchronous() throws {
        let outcomes = Shared<[PortError?]>([])
        let server = try twiceReplyingPort(outcomes)
        defer { server.stop() }
        let reply = try server.port.sendRequest(msgid: 10, timeout: .seconds(60), replyMode: "send-once")
        #expect(reply.msgid == 10, "the first reply is the one returned")
        #expect(waitUntil { outcomes.value.count == 2 })
        #expect(outcomes.value == [nil, .invalidPort])
    }

    @Test("§3.50 async sendRequest: the responder's second reply throws .invalidPort")
    func secondReplyThrowsAsync() async throws {
        let outcomes = Shared<[PortError?]>([])
        let server = try twiceReplyingPort(outcomes)
        defer { server.stop() }
        let reply = try await server.port.sendRequest(msgid: 20, timeout: .seconds(60))
        #expect(reply.msgid == 20)
        #expect(waitUntil { outcomes.value.count == 2 })
        #expect(outcomes.value == [nil, .invalidPort])
    }

    @Test("§3.50 a second send before the first reply was delivered throws .invalidPort too (consumed by the send, not the delivery)")
    func consumedBySendNotDelivery() throws {
        // A reply port as sendRequest makes it, on no loop: the first reply stays queued.
        let reply = try MessagePort(queueLimit: 1)
        reply.makeSendOnce()
        defer { reply.invalidate() }
        var outcomes: [PortError?] = []
        for _ in 0..<2 {
            do throws(PortError) {
                try reply.send(msgid: 2, timeout: .seconds(5))
                outcomes.append(nil)
            } catch {
                outcomes.append(error)
            }
        }
        #expect(outcomes == [nil, .invalidPort])
        #expect(reply.queuedCount == 1, "the first reply is queued, undelivered")
    }
}

@Suite("§3.50 send-once reply ports across processes", .timeLimit(.minutes(2)))
struct CrossProcessSendOnceTests {
    /// A child that owns a port, hands it over (msgid 500) and replies twice to every message.
    func twiceReplyingChild() throws -> (child: ChildProcess, port: MessagePort, receiver: ReceivingPort) {
        let receiver = try ReceivingPort(name: "send-once-xproc")
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeer, ["twice", "3"], inherit: [(sendRight, 3)])
        close(sendRight)
        let handshake = try #require(receiver.waitForMessages(1), "the child never sent its port\n\(child.output)")[0]
        let port = try #require(handshake.port(at: 0))
        receiver.clear()
        return (child, port, receiver)
    }

    @Test("§3.50 synchronous sendRequest to another process: its second reply, sent right after the first, throws .invalidPort there, and its proxy is closed")
    func secondReplyFromAnotherProcessThrowsSynchronous() throws {
        let (child, port, receiver) = try twiceReplyingChild()
        defer { receiver.stop(); child.kill(SIGKILL); _ = child.finish() }
        let reply = try port.sendRequest(msgid: 10, timeout: .seconds(60), replyMode: "request")
        #expect(reply.msgid == 11, "the first reply is the one returned")
        #expect(waitUntil { child.output.contains("msgid=10 replies:") }, "\(child.output)")
        #expect(child.output.contains("msgid=10 replies: sent, \(PortError.invalidPort) proxy valid: false"), "\(child.output)")
    }

    @Test("§3.50 async sendRequest to another process: its second reply throws .invalidPort there")
    func secondReplyFromAnotherProcessThrowsAsync() async throws {
        let (child, port, receiver) = try twiceReplyingChild()
        defer { receiver.stop(); child.kill(SIGKILL); _ = child.finish() }
        let reply = try await port.sendRequest(msgid: 20, timeout: .seconds(60))
        #expect(reply.msgid == 21)
        let reported = await offThePool { waitUntil { child.output.contains("msgid=20 replies:") } }
        #expect(reported, "\(child.output)")
        #expect(child.output.contains("msgid=20 replies: sent, \(PortError.invalidPort) proxy valid: false"), "\(child.output)")
    }

    @Test("§3.50 an ordinary reply port sent to another process stays an ordinary send right: both replies are sent and arrive")
    func ordinaryReplyPortTakesEverySend() throws {
        let (child, port, receiver) = try twiceReplyingChild()
        defer { receiver.stop(); child.kill(SIGKILL); _ = child.finish() }
        let replies = try ReceivingPort(name: "send-once-ordinary")
        defer { replies.stop() }
        try port.send(msgid: 30, from: replies.port, timeout: waitLimit)
        let arrived = try #require(replies.waitForMessages(2), "\(child.output)")
        #expect(arrived.map(\.msgid) == [31, 32])
        // The child reports once both sends returned, which may be after the replies arrived.
        #expect(waitUntil { child.output.contains("msgid=30 replies:") }, "\(child.output)")
        #expect(child.output.contains("msgid=30 replies: sent, sent proxy valid: true"), "\(child.output)")
    }

    @Test("§3.50 the frame of a request says its reply port is send-once (SEND_ONCE), as an independent C peer reads it")
    func requestFrameCarriesSendOnce() throws {
        let (receiveEnd, sendEnd) = rawSeqPacketPair()
        let child = try ChildProcess(portPeerC, ["serve", "3"], inherit: [(receiveEnd, 3)])
        close(receiveEnd)
        let cPort = try MessagePort(sendRight: sendEnd)
        let answer = try cPort.sendRequest(msgid: 2000, components: [.data(Data("hello from Swift".utf8))],
                                           timeout: .seconds(60), replyMode: "request")
        #expect(answer.msgid == 2001)
        let portOfC = try #require(answer.port(at: 1), "the reply's second component is a port")
        try portOfC.send(msgid: 2002, components: [.data(Data("bye".utf8))], timeout: waitLimit)
        let exit = child.finish()
        #expect(exit == .exited(0), "PortPeerC serve: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("received msgid=2000 reply=send-once components=1 data=\"hello from Swift\""),
                "\(child.output)")
    }
}

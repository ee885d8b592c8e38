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

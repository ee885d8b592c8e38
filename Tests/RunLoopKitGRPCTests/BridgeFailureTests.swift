#if GRPC
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit
import RunLoopKitGRPC
import Synchronization
import Testing

@Suite("gRPC bridge: deadlines, failures and backpressure")
struct BridgeFailureTests {
    @Test("sendRequest to a silent server: .replyTimedOut, sync and async", .timeLimit(.minutes(1)))
    func silentServer() async throws {
        let peer = try PeerProcess(name: "svc.silent", mode: "silent")
        let client = try LoopbackClient(port: peer.listeningPort)
        let proxy = try await client.client.connect(to: "svc.silent")
        await #expect(throws: PortError.replyTimedOut) {
            _ = try await proxy.sendRequest(msgid: 1, timeout: .milliseconds(300))
        }
        let sync = await requestOnThread(proxy, msgid: 2, timeout: .milliseconds(300))
        #expect(throws: PortError.replyTimedOut) { try sync.get() }
        #expect(proxy.isValid)
        proxy.invalidate()
        await client.stop()
    }

    @Test("the server SIGKILLed mid-request: .invalidPort from the kill, not the request's timeout, the proxy invalidated", .timeLimit(.minutes(1)))
    func serverKilled() async throws {
        let peer = try PeerProcess(name: "svc.doomed", mode: "silent")
        let client = try LoopbackClient(port: peer.listeningPort)
        let proxy = try await client.client.connect(to: "svc.doomed")
        let invalidated = Latch()
        proxy.setInvalidationHandler { _ in invalidated.raise() }

        let request = Task { try await proxy.sendRequest(msgid: 1, timeout: .seconds(60)) }
        // The request is on its way once the server had time to take it; the kill comes
        // after, and the outcome must come from the kill, not from the 60-second timeout.
        try await Task.sleep(for: .milliseconds(200))
        let killed = ContinuousClock.now
        peer.kill()
        let result = await request.result
        let elapsed = ContinuousClock.now - killed
        #expect(throws: PortError.invalidPort) { try result.get() }
        // Only the kill can end the request this early (its own timeout is 60 s). A hang guard,
        // not a latency bound: with the whole suite running on two cores it took over a second.
        #expect(elapsed < .seconds(30))
        #expect(!proxy.isValid)
        // The handler runs after the request is failed, on the invalidating thread: awaited.
        let handlerRan = await within(.seconds(10)) { await invalidated.wait(); return true } ?? false
        #expect(handlerRan)
        #expect(throws: PortError.invalidPort) { try proxy.send(msgid: 2, timeout: .seconds(1)) }
        await client.stop()
    }

    @Test("the server SIGKILLed while senders wait for room: blocked and suspended senders get .invalidPort from the kill, not their deadlines", .timeLimit(.minutes(1)))
    func killedWhileSendersWait() async throws {
        let peer = try PeerProcess(name: "svc.full", mode: "stall")
        let client = try LoopbackClient(port: peer.listeningPort, queueLimit: 4)
        let proxy = try await client.client.connect(to: "svc.full")
        let payload = Data(repeating: 0x5A, count: 64 * 1024)
        // One thread and one task keep sending, each with a minute to wait for room, until a
        // send fails: they end up blocked and suspended on the full stream.
        async let blocked = sendUntilFailure(proxy, msgid: 1, payload: payload, timeout: .seconds(60))
        let suspended = Task {
            while true { try await proxy.send(msgid: 2, components: [.data(payload)]) }
        }
        // Long enough for both to fill the stream and wait; were they not waiting yet, the kill
        // would still have to stop them with .invalidPort.
        try await Task.sleep(for: .milliseconds(500))
        let killed = ContinuousClock.now
        peer.kill()
        #expect(await blocked == .invalidPort)
        let suspendedOutcome = await suspended.result
        #expect(throws: PortError.invalidPort) { try suspendedOutcome.get() }
        // As above: the senders' own deadlines are a minute away.
        #expect(ContinuousClock.now - killed < .seconds(30))
        #expect(!proxy.isValid)
        await client.stop()
    }

    @Test("a server that stops reading: sync send times out, async send suspends, nothing lost or duplicated", .timeLimit(.minutes(1)))
    func backpressure() async throws {
        let peer = try PeerProcess(name: "svc.stall", mode: "stall")
        let client = try LoopbackClient(port: peer.listeningPort, queueLimit: 8)
        let proxy = try await client.client.connect(to: "svc.stall")
        let payload = Data(repeating: 0xA5, count: 64 * 1024)
        // Every message names `replies`, where the server echoes it once it receives it.
        let replies = try MessagePort(queueLimit: 4096)

        // Fill: the server's port (4), gRPC's flow-control window and buffers, then the
        // proxy's queue (8); the first send that finds everything full times out.
        var accepted: UInt32 = 0
        while true {
            do {
                try proxy.send(msgid: accepted, components: [.data(payload)], from: replies, timeout: .milliseconds(500))
                accepted += 1
            } catch {
                #expect(error == .timedOut)
                break
            }
            // Bounded: 64 KiB messages, so 2,000 would be 128 MiB in flight.
            try #require(accepted < 2_000)
        }
        #expect(accepted >= 8)

        // An async send waits rather than failing.
        let last = accepted
        let suspended = Task { try await proxy.send(msgid: last, components: [.data(payload)], from: replies) }
        try await Task.sleep(for: .milliseconds(200))
        #expect(proxy.isValid)

        // Resumed, the server receives everything exactly once, in order.
        let collected = Task {
            var msgids: [UInt32] = []
            for await message in replies.messages() {
                msgids.append(message.msgid)
                if message.msgid == last { break }
            }
            return msgids
        }
        peer.resume()
        try await suspended.value
        #expect(await collected.value == Array(0...last))
        proxy.invalidate()
        await client.stop()
    }
}
#endif

#if GRPC
import FoundationEssentials
import RunLoopKit
import RunLoopKitGRPC
import Testing

@Suite("gRPC bridge: sending and request/reply")
struct BridgeRequestReplyTests {
    @Test("send, async send and both sendRequest forms reach the exported port; replies come back", .timeLimit(.minutes(1)))
    func requestReplyInProcess() async throws {
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.echo")
        let client = try LoopbackClient(port: server.port)
        let proxy = try await client.client.connect(to: "svc.echo")
        #expect(proxy.isProxy)

        let reply = try await proxy.sendRequest(msgid: 10, components: [.data(bytes("async"))], timeout: .seconds(20))
        #expect(reply.msgid == 11)
        #expect(reply.data == bytes("async"))

        let syncReply = await requestOnThread(proxy, msgid: 20, components: [.data(bytes("sync"))], timeout: .seconds(20))
        #expect(try syncReply.get().msgid == 21)
        #expect(try syncReply.get().data == bytes("sync"))

        try proxy.send(msgid: 30, components: [.data(bytes("one")), .data(Data()), .data(bytes("three"))],
                       timeout: .seconds(20))
        try await proxy.send(msgid: 31)
        let done = try await proxy.sendRequest(msgid: 32, timeout: .seconds(20))
        #expect(done.msgid == 33)

        let messages = receiver.messages
        #expect(messages.map(\.msgid) == [10, 20, 30, 31, 32])
        #expect(messages[2].components.count == 3)
        #expect(messages[2].data(at: 2) == bytes("three"))
        #expect(messages[2].data(at: 1) == Data())
        #expect(messages[2].replyPort == nil)
        // Bridged messages name their remote peer, never a local process.
        #expect(messages.allSatisfy { $0.sender == nil && $0.remotePeer != nil })
        #expect(messages[0].remotePeer?.certificate == nil)

        proxy.invalidate()
        await client.stop()
        await server.stop()
    }

    @Test("a reply port given as from: gets the replies; a port component throws .notTransferable", .timeLimit(.minutes(1)))
    func replyPortsAndPortComponents() async throws {
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.ports")
        let client = try LoopbackClient(port: server.port)
        let proxy = try await client.client.connect(to: "svc.ports")

        let replies = try MessagePort(queueLimit: 16)
        for msgid in UInt32(1)...3 {
            try await proxy.send(msgid: msgid * 10, components: [.data(bytes("r\(msgid)"))], from: replies)
        }
        var iterator = replies.messages().makeAsyncIterator()
        var got: [UInt32] = []
        for _ in 0..<3 { got.append(try #require(await iterator.next()).msgid) }
        #expect(got == [11, 21, 31])

        let other = try MessagePort()
        #expect(throws: PortError.notTransferable) {
            try proxy.send(msgid: 1, components: [.port(other)], timeout: .seconds(5))
        }
        await #expect(throws: PortError.notTransferable) {
            try await proxy.send(msgid: 1, components: [.data(Data()), .port(other)])
        }
        #expect(throws: PortError.notTransferable) { _ = try proxy.makeSendRight() }
        #expect(proxy.isValid)
        // Nothing of the refused messages arrived: the next request is the only one.
        _ = try await proxy.sendRequest(msgid: 100, timeout: .seconds(20))
        #expect(receiver.messages.map(\.msgid) == [10, 20, 30, 100])

        proxy.invalidate()
        await client.stop()
        await server.stop()
    }

    @Test("connect: an unknown name, an invalid name", .timeLimit(.minutes(1)))
    func connectErrors() async throws {
        let receiver = try Receiver(name: "exported")
        let server = try await LoopbackServer(exporting: receiver.port, as: "svc.known")
        let client = try LoopbackClient(port: server.port)
        await #expect(throws: RemoteConnectError.nameNotFound("svc.unknown")) {
            _ = try await client.client.connect(to: "svc.unknown")
        }
        await #expect(throws: RemoteConnectError.invalidName("no/slash")) {
            _ = try await client.client.connect(to: "no/slash")
        }
        #expect(throws: PortError.nameInUse("svc.known")) {
            try server.server.exporter.export(try MessagePort(), as: "svc.known")
        }
        #expect(receiver.messages.isEmpty)
        await client.stop()
        await server.stop()
    }

    @Test("plaintext off loopback is refused unless allowed", .timeLimit(.minutes(1)))
    func plaintextOffLoopback() throws {
        #expect(throws: BridgeConfigurationError.plaintextOffLoopback("192.0.2.1")) {
            _ = try PortBridgeServer(host: "192.0.2.1", port: 0, security: .plaintext())
        }
        #expect(throws: BridgeConfigurationError.plaintextOffLoopback("0.0.0.0")) {
            _ = try PortBridgeClient(host: "0.0.0.0", port: 1, security: .plaintext())
        }
        _ = try PortBridgeServer(host: "0.0.0.0", port: 0, security: .plaintext(allowNonLoopback: true))
    }

    @Test("two processes: 10,000 request/replies, each reply matched, per-sender order held", .timeLimit(.minutes(1)))
    func crossProcessRequestReply() async throws {
        let peer = try PeerProcess(name: "svc.xecho", mode: "echo")
        let client = try LoopbackClient(port: peer.listeningPort)
        let proxy = try await client.client.connect(to: "svc.xecho")

        // Two senders at once, each numbering its own requests: replies match requests, and each
        // sender's one-way messages, echoed to its reply port, come back in the order sent.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for sender in UInt32(0)..<2 {
                group.addTask {
                    for index in UInt32(0)..<5_000 {
                        let payload = bytes("\(sender)-\(index)")
                        let reply = try await proxy.sendRequest(msgid: sender << 16 | index, components: [.data(payload)],
                                                                timeout: .seconds(30))
                        #expect(reply.msgid == sender << 16 | index)
                        #expect(reply.data == payload)
                    }
                }
            }
            try await group.waitForAll()
        }

        let replies = try MessagePort(queueLimit: 256)
        let received = Task {
            var order: [UInt32] = []
            for await message in replies.messages() {
                order.append(message.msgid)
                if order.count == 1_000 { break }
            }
            return order
        }
        // The blocking sends on a thread of their own: on the cooperative pool, a send waiting
        // for room would hold one of its two threads while the consumer above needs one.
        let sent: PortError? = await onThread("one-way sender") {
            do throws(PortError) {
                for index in UInt32(0)..<1_000 { try proxy.send(msgid: index, from: replies, timeout: .seconds(30)) }
                return nil
            } catch {
                return error
            }
        }
        #expect(sent == nil)
        // Within a hang guard: a send that timed out under load leaves the consumer short of
        // 1,000, and only cancelling it ends its wait.
        let order = await within(.seconds(60)) { await received.value }
        received.cancel()
        #expect(order == Array(0..<1_000))

        proxy.invalidate()
        await client.stop()
    }
}
#endif

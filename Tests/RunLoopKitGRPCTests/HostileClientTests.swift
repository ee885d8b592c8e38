#if GRPC
import FoundationEssentials
import GRPCCore
import GRPCNIOTransportHTTP2
import RunLoopKit
import RunLoopKitGRPC
import Testing

extension KeepaliveSensitive {
    @Suite("gRPC bridge: a hostile client costs only its own streams")
    struct HostileClientTests {
        @Test("malformed, out-of-order and oversize frames and a flood of streams: each fails alone; others are served; no leak", .timeLimit(.minutes(1)))
        func hostileClient() async throws {
            let receiver = try Receiver(name: "exported")
            let server = try await LoopbackServer(exporting: receiver.port, as: "svc.target")
            let good = try LoopbackClient(port: server.port)
            let proxy = try await good.client.connect(to: "svc.target")
            _ = try await proxy.sendRequest(msgid: 1, timeout: .seconds(20))
            let baseline = openDescriptorCount()

            let transport = try HTTP2ClientTransport.Posix(target: .ipv4(address: "127.0.0.1", port: server.port),
                                                           transportSecurity: .plaintext)
            try await withGRPCClient(transport: transport) { raw in
                let malformed: [(String, [[UInt8]])] = [
                    ("bad version", [[9, 1, 0, 0] + Array("svc.target".utf8)]),
                    ("empty frame", [[]]),
                    ("MESSAGE before OPEN", [RawStream.message(msgid: 5)]),
                    ("second OPEN", [RawStream.open("svc.target"), RawStream.open("svc.target")]),
                    ("lengths past the end", [RawStream.open("svc.target"), Array(RawStream.message(msgid: 6, data: [1, 2]).dropLast())]),
                    ("unknown name", [RawStream.open("svc.nothing")]),
                ]
                for (what, frames) in malformed {
                    let outcome = await RawStream.run(raw, frames: frames)
                    #expect(outcome.code != nil, "\(what)")
                }
                // Larger than the 4 MiB frame limit: gRPC refuses the message, and the stream fails.
                let oversize = await RawStream.run(raw, frames: [RawStream.open("svc.target"),
                                                                  RawStream.message(msgid: 7, data: [UInt8](repeating: 0, count: 5 << 20))])
                #expect(oversize.code != nil)

                // A flood: 200 streams at once, each opened and abandoned.
                await withTaskGroup(of: RawStream.Outcome.self) { group in
                    for _ in 0..<200 { group.addTask { await RawStream.run(raw, frames: [RawStream.open("svc.target")]) } }
                    for await outcome in group { #expect(outcome.code == nil && outcome.frames.count == 1) }
                }

                // Meanwhile the good client is served as before.
                let reply = try await proxy.sendRequest(msgid: 2, components: [.data(bytes("still here"))], timeout: .seconds(20))
                #expect(reply.data == bytes("still here"))
            }
            // Nothing the hostile client sent was delivered.
            #expect(receiver.messages.map(\.msgid) == [1, 2])

            // Its streams' resources are gone with its connection (closing is asynchronous: a
            // hang guard of seconds, not a timing threshold).
            var settled = openDescriptorCount()
            let guardDeadline = ContinuousClock.now + .seconds(10)
            while settled > baseline && ContinuousClock.now < guardDeadline {
                try await Task.sleep(for: .milliseconds(50))
                settled = openDescriptorCount()
            }
            #expect(settled <= baseline)
            proxy.invalidate()
            await good.stop()
            await server.stop()
        }
    }
}
#endif

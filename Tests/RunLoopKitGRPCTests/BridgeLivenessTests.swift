#if GRPC
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
@testable import RunLoopKit
@testable import RunLoopKitGRPC
import Synchronization
import Testing

// A remote proxy dies with what it stands for, promptly: the exported port invalidated or
// unexported on the server, or the server gone silent. Every outcome awaited here would come,
// wrongly, at a 30-second timeout (`.replyTimedOut`, `.timedOut`) were the end not passed on:
// the hang guards of 10 to 20 s make such a test fail sooner, and the error case says why.

extension KeepaliveSensitive {
    @Suite("gRPC bridge: an export's end and a silent server invalidate the proxies")
    struct BridgeLivenessTests {
        enum Ending: String, CaseIterable, Sendable, CustomTestStringConvertible {
            case invalidate, unexport
            var testDescription: String { rawValue }
        }

        @Test("the exported port invalidated or unexported: every stream ends at once — a pending request on an idle stream, a blocked and a suspended sender on a full one get .invalidPort, both proxies are invalidated",
              .timeLimit(.minutes(1)), arguments: Ending.allCases)
        func exportEnds(_ ending: Ending) async throws {
            // A port nobody receives: one message fills it.
            let local = try MessagePort(queueLimit: 1)
            defer { local.invalidate() }
            let server = try await LoopbackServer(exporting: local, as: "svc.ending")
            let client = try LoopbackClient(port: server.port, queueLimit: 2)
            // Two streams to the one export: an idle one, whose server side waits for its next
            // frame, and a full one, whose server side waits for room in the port.
            let idle = try await client.client.connect(to: "svc.ending")
            let full = try await client.client.connect(to: "svc.ending")
            let idleInvalidated = Latch()
            idle.setInvalidationHandler { _ in idleInvalidated.raise() }
            let fullInvalidated = Latch()
            full.setInvalidationHandler { _ in fullInvalidated.raise() }

            // A request with 30 s to wait for its reply, queued on the server's port; its stream
            // then has nothing more to carry.
            let request = Task { try await idle.sendRequest(msgid: 1, timeout: .seconds(30)) }
            try await waitUntil("the request is queued on the exported port") { local.queuedCount == 1 }

            // A thread and a task send on the other stream until it is full, each with 30 s (or no
            // limit) to wait for room: the thread blocks and the task suspends.
            let payload = Data(repeating: 0x3C, count: 64 * 1024)
            let blocked = Task { await sendUntilFailure(full, msgid: 2, payload: payload, timeout: .seconds(30)) }
            let suspended = Task {
                while true { try await full.send(msgid: 3, components: [.data(payload)]) }
            }
            let outbox = try #require((full.conduit as? RemotePortConduit)?.outbox.port)
            try await waitUntil("both senders wait for room in the full stream") {
                outbox.statistics.sendersBlocked >= 2
            }
            #expect(idle.isValid && full.isValid)

            switch ending {
            case .invalidate: local.invalidate()
            case .unexport: server.server.exporter.unexport("svc.ending")
            }

            let requestOutcome = await within(.seconds(10)) { await request.result }
            #expect(throws: PortError.invalidPort) { try #require(requestOutcome).get() }
            let blockedOutcome = await within(.seconds(10)) { await blocked.value }
            #expect(blockedOutcome == .invalidPort)
            let suspendedOutcome = await within(.seconds(10)) { await suspended.result }
            #expect(throws: PortError.invalidPort) { try #require(suspendedOutcome).get() }
            for (proxy, latch) in [(idle, idleInvalidated), (full, fullInvalidated)] {
                let handlerRan = await within(.seconds(10)) { await latch.wait(); return true } ?? false
                #expect(handlerRan, "the invalidation handler ran")
                #expect(!proxy.isValid)
                #expect(throws: PortError.invalidPort) { try proxy.send(msgid: 4, timeout: .seconds(1)) }
            }
            // The name is gone for new clients too; after unexport the port itself is still valid.
            await #expect(throws: RemoteConnectError.nameNotFound("svc.ending")) {
                _ = try await client.client.connect(to: "svc.ending")
            }
            #expect(local.isValid == (ending == .unexport))

            await client.stop()
            await server.stop()
        }

        @Test("the port invalidated before a stream opens, or the name unexported: connect gives .nameNotFound",
              .timeLimit(.minutes(1)))
        func endedExportRefusesStreams() async throws {
            let local = try MessagePort(queueLimit: 8)
            defer { local.invalidate() }
            let server = try await LoopbackServer(exporting: local, as: "svc.once")
            let client = try LoopbackClient(port: server.port)
            server.server.exporter.unexport("svc.once")
            await #expect(throws: RemoteConnectError.nameNotFound("svc.once")) {
                _ = try await client.client.connect(to: "svc.once")
            }
            // Exported again, then its port invalidated: the name is free and refuses streams.
            try server.server.exporter.export(local, as: "svc.once", access: .anyone)
            let proxy = try await client.client.connect(to: "svc.once")
            let invalidated = Latch()
            proxy.setInvalidationHandler { _ in invalidated.raise() }
            local.invalidate()
            await #expect(throws: RemoteConnectError.nameNotFound("svc.once")) {
                _ = try await client.client.connect(to: "svc.once")
            }
            let proxyInvalidated = await within(.seconds(10)) { await invalidated.wait(); return true } ?? false
            #expect(proxyInvalidated, "the open stream's proxy was invalidated")
            #expect(!proxy.isValid)
            #expect(throws: PortError.invalidPort) {
                try server.server.exporter.export(local, as: "svc.twice", access: .anyone)
            }
            await client.stop()
            await server.stop()
        }

        @Test("a quiet stream outlives many keepalive rounds: the server accepts the client's pings, the proxy stays valid",
              .timeLimit(.minutes(1)))
        func quietStreamStaysOpen() async throws {
            let receiver = try Receiver(name: "quiet service")
            let server = try await LoopbackServer(exporting: receiver.port, as: "svc.quiet", keepalive: .tolerantServer)
            let client = try LoopbackClient(port: server.port, keepalive: .testClient)
            let proxy = try await client.client.connect(to: "svc.quiet")
            let invalidated = Latch()
            proxy.setInvalidationHandler { _ in invalidated.raise() }
            // Five keepalive intervals (3 s) without a message: the window in which a server
            // that took the client's pings for abuse (gRPC's default tolerates one per five
            // minutes) would send it away, GOAWAY too_many_pings, at the fourth. Not a threshold
            // to pass.
            try await Task.sleep(for: .seconds(15))
            #expect(!invalidated.isRaised)
            #expect(proxy.isValid)
            let reply = try await proxy.sendRequest(msgid: 5, timeout: .seconds(30))
            #expect(reply.msgid == 6)
            proxy.invalidate()
            await client.stop()
            await server.stop()
        }

        @Test("a client that connects and then sends nothing, acknowledging no ping, is disconnected by a server with keepalive; a quiet live client on the same server is not",
              .timeLimit(.minutes(1)))
        func silentClientDisconnected() async throws {
            let receiver = try Receiver(name: "watched service")
            let server = try await LoopbackServer(exporting: receiver.port, as: "svc.watched", keepalive: .watchingServer)
            let live = try LoopbackClient(port: server.port)
            let proxy = try await live.client.connect(to: "svc.watched")
            #expect(try await proxy.sendRequest(msgid: 1, timeout: .seconds(30)).msgid == 2)

            // Without its own idle limit the server's keepalive would only send GOAWAY and a ping,
            // which the silent peer never answers, and hold the connection for ever.
            let port = server.port
            let closed = await onThread("silent client") { silentConnectionIsClosed(port: port, within: .seconds(20)) }
            #expect(closed, "the server closed the silent connection")

            // The live client said nothing meanwhile either, for longer than the idle limit: it
            // kept its connection by acknowledging the server's pings.
            #expect(proxy.isValid)
            #expect(try await proxy.sendRequest(msgid: 3, timeout: .seconds(30)).msgid == 4)
            proxy.invalidate()
            await live.stop()
            await server.stop()
        }

        @Test("the server process stopped (SIGSTOP) mid-stream: keepalive notices, a pending 30 s request gets .invalidPort, the proxy is invalidated",
              .timeLimit(.minutes(1)))
        func serverStopped() async throws {
            let peer = try PeerProcess(name: "svc.frozen", mode: "echo")
            // A stopped process is left neither stopped nor running, whatever happens here.
            defer {
                peer.continueProcess()
                peer.kill()
            }
            let client = try LoopbackClient(port: peer.listeningPort, keepalive: .testClient)
            let proxy = try await client.client.connect(to: "svc.frozen")
            let invalidated = Latch()
            proxy.setInvalidationHandler { _ in invalidated.raise() }
            // The stream works: a round trip.
            let echoed = try await proxy.sendRequest(msgid: 7, components: [.data(bytes("alive"))], timeout: .seconds(30))
            #expect(echoed.msgid == 7)

            // The server stops: its sockets stay open, its kernel still acknowledges TCP, and
            // nothing more ever comes from it — no FIN, no reset, no reply.
            peer.suspendProcess()
            let request = Task { try await proxy.sendRequest(msgid: 8, timeout: .seconds(30)) }

            let outcome = await within(.seconds(20)) { await request.result }
            #expect(throws: PortError.invalidPort) { try #require(outcome).get() }
            let handlerRan = await within(.seconds(20)) { await invalidated.wait(); return true } ?? false
            #expect(handlerRan, "the invalidation handler ran")
            #expect(!proxy.isValid)
            #expect(throws: PortError.invalidPort) { try proxy.send(msgid: 9, timeout: .seconds(1)) }

            peer.continueProcess()
            peer.kill()
            await client.stop()
        }
    }
}
#endif

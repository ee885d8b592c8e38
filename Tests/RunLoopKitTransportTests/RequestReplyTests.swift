// Guarantees §3.28: sendRequest, synchronous and async, to local ports, proxies and named ports.
// Timeouts of 60 s are hang guards: a test that passes never waits for them.

import Glibc
import FoundationEssentials
import Synchronization
import Testing
@testable import RunLoopKit

/// A local port on its own thread that answers each request with msgid + 1 and "re: <data>".
func answeringPort(_ name: String) throws -> ReceivingPort {
    try ReceivingPort(name: name) { message in
        try? message.replyPort?.send(msgid: message.msgid + 1,
                                     components: [.data(Data("re: ".utf8) + (message.data ?? Data()))],
                                     timeout: waitLimit)
    }
}

/// Runs `body` on a new thread; nil if it has not returned within `timeout` (a hang guard).
func onThread<T: Sendable>(timeout: Duration = waitLimit, _ body: @escaping @Sendable () -> T) -> T? {
    let result = Shared<T?>(nil)
    let thread = ResidentThread(name: "request")
    try? thread.perform { result.value = body() }
    guard waitUntil(timeout: timeout, { result.value != nil }) else {
        // Stopping would wait for the hung body: leave the thread to the process's exit.
        _ = Unmanaged.passRetained(thread)
        return nil
    }
    thread.stop()
    return result.value
}

@Suite("§3.28 sendRequest")
struct RequestReplyTests {
    @Test("§3.28 sendRequest to a local port returns the reply; the reply port was a proxy-free local port used once")
    func localReply() throws {
        let server = try answeringPort("server")
        defer { server.stop() }
        let reply = try server.port.sendRequest(msgid: 10, components: [.data(Data("ping".utf8))],
                                                timeout: .seconds(60), replyMode: "private")
        #expect(reply.msgid == 11 && reply.text == "re: ping")
        let request = try #require(server.waitForMessages(1)?.first)
        #expect(request.replyPort?.isValid == false, "the one-shot reply port is dead after its reply")
    }

    @Test("§3.28 sendRequest through a proxy (named port, another process) returns the reply")
    func namedReplyAcrossProcesses() throws {
        let name = uniqueName("request")
        let owner = try peer(["serve-name", name, "same-user", "reply"])
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let server = try MessagePort.connect(to: name)
        for index in 0..<20 {
            let reply = try server.sendRequest(msgid: 100, components: [.data(Data("n\(index)".utf8))],
                                               timeout: .seconds(60), replyMode: .default)
            #expect(reply.msgid == 101 && reply.text == "re: n\(index)")
            #expect(reply.sender?.pid == owner.pid)
        }
    }

    @Test("§3.28 no answer: .replyTimedOut")
    func replyTimedOut() throws {
        let silent = try ReceivingPort(name: "silent")
        defer { silent.stop() }
        #expect(throws: PortError.replyTimedOut) {
            _ = try silent.port.sendRequest(msgid: 1, timeout: .milliseconds(200), replyMode: "private")
        }
        #expect(silent.waitForMessages(1) != nil, "the request itself was delivered")
    }

    @Test("§3.28 the request cannot be queued in time: .timedOut")
    func requestTimedOut() throws {
        let full = try MessagePort(queueLimit: 1)
        defer { full.invalidate() }
        try full.send(msgid: 0, timeout: .zero)
        #expect(throws: PortError.timedOut) {
            _ = try full.sendRequest(msgid: 1, timeout: .milliseconds(100), replyMode: "private")
        }
    }

    @Test("§3.28 async sendRequest: a queue full for the whole timeout throws .timedOut, not .replyTimedOut")
    func asyncRequestTimedOut() async throws {
        let full = try MessagePort(queueLimit: 1)
        defer { full.invalidate() }
        try full.send(msgid: 0, timeout: .zero)
        await #expect(throws: PortError.timedOut) {
            _ = try await full.sendRequest(msgid: 1, timeout: .milliseconds(200))
        }
        #expect(full.queuedCount == 1, "the request was never queued")
    }

    @Test("§3.28 the destination invalidated while waiting: .invalidPort, long before the 60 s timeout")
    func destinationInvalidated() throws {
        let server = try ReceivingPort(name: "dies") { message in
            // Received: now the port dies instead of answering.
            _ = message
        }
        defer { server.stop() }
        let port = server.port
        let invalidator = Invalidator.invalidate(port, afterMessageTo: server)
        defer { invalidator.stop() }
        let outcome = onThread { () -> PortError? in
            do throws(PortError) {
                _ = try port.sendRequest(msgid: 1, timeout: .seconds(60), replyMode: "private")
                return nil
            } catch {
                return error
            }
        }
        #expect(outcome == .some(.invalidPort), "hang guard of \(waitLimit): \(String(describing: outcome))")
    }

    @Test("§3.28 the server process killed mid-request: .invalidPort, long before the 60 s timeout")
    func serverKilled() throws {
        let name = uniqueName("killed-mid-request")
        let owner = try peer(["serve-name", name, "same-user", "silent"])
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let server = try MessagePort.connect(to: name)
        let outcome = Shared<PortError??>(nil)
        let thread = ResidentThread(name: "request")
        defer { thread.stop() }
        try thread.perform {
            do throws(PortError) {
                _ = try server.sendRequest(msgid: 1, timeout: .seconds(60), replyMode: "private")
                outcome.value = .some(nil)
            } catch {
                outcome.value = .some(error)
            }
        }
        #expect(owner.waitForOutput("got 1"), "\(owner.output)")
        owner.kill(SIGKILL)
        #expect(waitUntil { outcome.value != nil }, "hang guard: no outcome within \(waitLimit)")
        #expect(outcome.value == .some(.invalidPort))
    }

    @Test("§3.28 send-once: after the first reply, a second send to the reply port throws .invalidPort (local and remote)")
    func sendOnce() throws {
        let server = try answeringPort("once")
        defer { server.stop() }
        _ = try server.port.sendRequest(msgid: 1, timeout: .seconds(60), replyMode: "private")
        let replyPort = try #require(server.waitForMessages(1)?.first?.replyPort)
        #expect(throws: PortError.invalidPort) { try replyPort.send(msgid: 99, timeout: .zero) }

        let name = uniqueName("twice")
        let owner = try peer(["serve-name", name, "same-user", "twice"])
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let proxy = try MessagePort.connect(to: name)
        let reply = try proxy.sendRequest(msgid: 50, timeout: .seconds(60), replyMode: "private")
        #expect(reply.msgid == 51)
        #expect(owner.waitForOutput("second reply: \(PortError.invalidPort)"), "\(owner.output)")
    }

    @Test("§3.28 waiting in a private reply mode, the loop's default-mode items do not run; in .default they do")
    func replyModeIsolation() throws {
        // The server answers only once the default-mode block has run: the request completes
        // only when the waiting loop services .default.
        for replyMode: ThreadRunLoop.Mode in ["private", .default] {
            let go = Shared(false)
            let server = try ReceivingPort(name: "gated") { message in
                waitUntil { go.value }
                try? message.replyPort?.send(msgid: 2, timeout: waitLimit)
            }
            defer { server.stop() }
            let outcome = onThread { () -> (Result<UInt32, PortError>, Bool) in
                let loop = ThreadRunLoop.current
                let ran = Shared(false)
                loop.perform(inModes: [.default]) {
                    ran.value = true
                    go.value = true
                }
                let result = Result { () throws(PortError) in
                    try server.port.sendRequest(msgid: 1, timeout: .milliseconds(500), replyMode: replyMode).msgid
                }
                let ranDuringWait = ran.value
                go.value = true
                return (result, ranDuringWait)
            }
            let (result, ranDuringWait) = try #require(outcome)
            if replyMode == .default {
                #expect(ranDuringWait && (try? result.get()) == 2, "\(result)")
            } else {
                #expect(!ranDuringWait, "a default-mode block ran during a private-mode wait")
                #expect(result == .failure(.replyTimedOut))
            }
        }
    }

    @Test("§3.28 async sendRequest: reply, .replyTimedOut, .invalidPort, .requestCancelled once the request was queued")
    func asyncRequests() async throws {
        let server = try answeringPort("async")
        defer { server.stop() }
        let reply = try await server.port.sendRequest(msgid: 20, components: [.data(Data("a".utf8))], timeout: .seconds(60))
        #expect(reply.msgid == 21 && reply.text == "re: a")

        let silent = try ReceivingPort(name: "async-silent")
        defer { silent.stop() }
        await #expect(throws: PortError.replyTimedOut) {
            _ = try await silent.port.sendRequest(msgid: 1, timeout: .milliseconds(200))
        }

        let dying = try ReceivingPort(name: "async-dying")
        defer { dying.stop() }
        let invalidator = Invalidator.invalidate(dying.port, afterMessageTo: dying)
        defer { invalidator.stop() }
        await #expect(throws: PortError.invalidPort) {
            _ = try await dying.port.sendRequest(msgid: 1, timeout: .seconds(60))
        }

        let task = Task { try await silent.port.sendRequest(msgid: 2, timeout: .seconds(60)) }
        // Suspending, not blocking: the task needs a thread of the concurrency pool to start.
        let deadline = ContinuousClock.now + waitLimit
        while silent.messages.value.count < 2 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(silent.messages.value.count == 2)
        task.cancel()
        // The request was delivered: the error says so, so that a retry is not taken for safe.
        await #expect(throws: PortError.requestCancelled) { _ = try await task.value }
        #expect(PortError.requestCancelled.description.contains("after its request was queued"))
        #expect(PortError.cancelled.description.contains("before the message could be queued"))
    }

    @Test("§3.28 async sendRequest to a named port in another process")
    func asyncNamed() async throws {
        let name = uniqueName("async-named")
        let owner = try peer(["serve-name", name, "same-user", "reply"])
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let server = try MessagePort.connect(to: name)
        let reply = try await server.sendRequest(msgid: 30, components: [.data(Data("x".utf8))], timeout: .seconds(60))
        #expect(reply.msgid == 31 && reply.text == "re: x")
    }
}

enum Invalidator {
    /// Invalidates `port` on another thread once `receiver` has a message (the request arrived).
    /// Keep the returned thread until the test is done.
    static func invalidate(_ port: MessagePort, afterMessageTo receiver: ReceivingPort) -> ResidentThread {
        let thread = ResidentThread(name: "invalidator")
        try? thread.perform {
            waitUntil { !receiver.messages.value.isEmpty }
            port.invalidate()
        }
        return thread
    }
}

// Tests 2–5 and 7: real child processes exchanging messages with ports of the test process.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

@Suite("Cross-process ports", .timeLimit(.minutes(2)))
struct CrossProcessTests {
    /// A receiving port whose handler answers every message that has a reply port with
    /// msgid + 1 and DATA "<prefix><request text>".
    func replyingPort(_ name: String, prefix: String) throws -> ReceivingPort {
        try ReceivingPort(name: name) { message in
            guard let replyPort = message.replyPort else { return }
            try? replyPort.send(msgid: message.msgid + 1,
                                components: [.data(Data((prefix + (message.text ?? "")).utf8))],
                                timeout: .seconds(10))
        }
    }

    // MARK: 2

    @Test("request/reply across fork/exec: a Swift child sends with a reply port, the parent replies")
    func requestReply() throws {
        let receiver = try replyingPort("xproc-request-reply", prefix: "parent got: ")
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeer, ["client", "3", "parent got: hello from Swift child"],
                                     inherit: [(sendRight, 3)])
        close(sendRight)

        let exit = child.finish()
        #expect(exit == .exited(0), "PortPeer client: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        let messages = try #require(receiver.waitForMessages(1), "the request never arrived")
        #expect(messages.count == 1)
        #expect(messages[0].msgid == 1000)
        #expect(messages[0].text == "hello from Swift child")
        #expect(messages[0].replyPort?.isProxy == true, "a reply port from another process arrives as a proxy")
        // The child is gone: its connection closes and the port forgets it.
        receiver.clear()
        #expect(waitUntil { receiver.port.connectionCount == 0 }, "connectionCount stays \(receiver.port.connectionCount)")
        #expect(receiver.port.isValid)
    }

    // MARK: 3

    @Test("port forwarding across three processes: C reaches A's port through a component sent by B")
    func forwardingThroughThreeProcesses() throws {
        let a = try ReceivingPort(name: "xproc-forward-A")
        defer { a.stop() }
        let sendRight = try a.port.makeSendRight()
        let b = try ChildProcess(portPeer, ["forward", "3"], inherit: [(sendRight, 3)])
        close(sendRight)
        // A made exactly one send right; C's message must arrive on it (the forwarded
        // descriptor), not on anything B set up.
        #expect(a.port.connectionCount == 1)

        let exit = b.finish()
        #expect(exit == .exited(0), "PortPeer forward: \(exit.map(\.description) ?? "timed out")\n\(b.output)")
        let messages = try #require(a.waitForMessages(2), "A got \(a.msgids)\n\(b.output)")
        #expect(messages.map(\.msgid) == [2999, 3000])

        // 2999 from B: "B <pid of B> C <pid of C>"; 3000 from C: "C pid <pid of C> nonce <n>".
        let fromB = (messages[0].text ?? "").split(separator: " ")
        let fromC = (messages[1].text ?? "").split(separator: " ")
        #expect(fromB.count == 4 && fromB[0] == "B" && fromB[2] == "C", "\(messages[0])")
        #expect(fromC.count == 5 && fromC[0] == "C" && fromC[1] == "pid", "\(messages[1])")
        guard fromB.count == 4, fromC.count == 5 else { return }
        #expect(fromB[1] == "\(b.pid)", "B is the process A spawned")
        #expect(fromC[2] == fromB[3], "the message comes from the process B spawned")
        #expect(fromC[2] != fromB[1], "C is not B")
        // The nonce C drew is in B's output only if C printed it; A read it from C's message.
        #expect(b.output.contains("C sent msgid=3000 nonce=\(fromC[4])"), "\(b.output)")
        #expect(waitUntil { a.port.connectionCount == 0 }, "connectionCount stays \(a.port.connectionCount)")
    }

    // MARK: 4

    @Test("the C peer (written from the spec) sends a request to a Swift port and gets the reply")
    func cPeerRequestsFromSwift() throws {
        let receiver = try replyingPort("xproc-c-request", prefix: "Swift got: ")
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeerC, ["request", "3", "Swift got: hello from C"], inherit: [(sendRight, 3)])
        close(sendRight)

        let exit = child.finish()
        #expect(exit == .exited(0), "PortPeerC request: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        let messages = try #require(receiver.waitForMessages(1))
        #expect(messages[0].msgid == 1000)
        #expect(messages[0].text == "hello from C")
        #expect(messages[0].components.count == 1)
        #expect(messages[0].replyPort?.isProxy == true)
        #expect(child.output.contains("received msgid=1001 reply=false components=1 data=\"Swift got: hello from C\""),
                "\(child.output)")
    }

    @Test("Swift sends to a port owned by the C peer, gets its reply with a port component, and uses that port")
    func swiftRequestsFromCPeer() throws {
        let replies = try ReceivingPort(name: "xproc-c-serve")
        defer { replies.stop() }
        let (receiveEnd, sendEnd) = rawSeqPacketPair()
        let child = try ChildProcess(portPeerC, ["serve", "3"], inherit: [(receiveEnd, 3)])
        close(receiveEnd)
        let cPort = try MessagePort(sendRight: sendEnd)
        #expect(cPort.isProxy)

        try cPort.send(msgid: 2000, components: [.data(Data("hello from Swift".utf8))], from: replies.port, timeout: waitLimit)
        let answer = try #require(replies.waitForMessages(1), "no reply from PortPeerC\n\(child.output)")[0]
        #expect(answer.msgid == 2001)
        #expect(answer.components.count == 2)
        #expect(answer.text == "C got: hello from Swift")
        let portOfC = try #require(answer.port(at: 1), "the reply's second component is a port")
        #expect(portOfC.isProxy)
        try portOfC.send(msgid: 2002, components: [.data(Data("bye".utf8))], timeout: waitLimit)

        let exit = child.finish()
        #expect(exit == .exited(0), "PortPeerC serve: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("received msgid=2000 reply=true components=1 data=\"hello from Swift\""), "\(child.output)")
        #expect(child.output.contains("received msgid=2002 reply=false components=1 data=\"bye\""), "\(child.output)")
    }

    // MARK: 5

    @Test("a sender killed with SIGKILL mid-stream: its connection goes, the port keeps working")
    func senderKilledMidStream() throws {
        let receiver = try ReceivingPort(name: "xproc-stream", keepMessages: false)
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeer, ["stream", "3"], inherit: [(sendRight, 3)])
        close(sendRight)

        #expect(receiver.waitForMessages(200) != nil, "the stream did not start\n\(child.output)")
        child.kill(SIGKILL)
        #expect(child.wait() == .signalled(SIGKILL), "\(child.output)")

        #expect(waitUntil { receiver.port.connectionCount == 0 }, "connectionCount stays \(receiver.port.connectionCount)")
        #expect(receiver.errors.value.isEmpty, "a peer that dies is not a protocol error: \(receiver.errors.value)")
        // In order, none lost or duplicated: 0, 1, 2, … up to wherever the kill landed.
        let streamed = receiver.msgids
        #expect(streamed == Array(0..<UInt32(streamed.count)), "messages out of order or missing")

        // The port is still valid for local senders.
        #expect(receiver.port.isValid)
        try receiver.port.send(msgid: 99_999, timeout: waitLimit)
        #expect(waitUntil { receiver.msgids.last == 99_999 }, "a local message after the kill was not delivered")
    }

    @Test("the owner killed with SIGKILL: proxies fail with .invalidPort and their invalidation handlers run")
    func ownerKilled() throws {
        let receiver = try ReceivingPort(name: "xproc-owner")
        defer { receiver.stop() }
        let replies = try ReceivingPort(name: "xproc-owner-replies")
        defer { replies.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeer, ["own", "3"], inherit: [(sendRight, 3)])
        close(sendRight)

        let handshake = try #require(receiver.waitForMessages(1), "the owner never sent its port\n\(child.output)")[0]
        #expect(handshake.msgid == 500)
        #expect(handshake.text == "\(child.pid)")
        let watched = try #require(handshake.port(at: 0))
        let unwatched = try #require(handshake.port(at: 1))
        #expect(watched.isProxy && unwatched.isProxy)
        receiver.clear()

        // Both proxies reach the owner while it lives.
        try watched.send(msgid: 10, components: [.data(Data("ping".utf8))], from: replies.port, timeout: waitLimit)
        try unwatched.send(msgid: 20, components: [.data(Data("ping".utf8))], from: replies.port, timeout: waitLimit)
        let answers = try #require(replies.waitForMessages(2), "the owner did not answer\n\(child.output)")
        #expect(Set(answers.map(\.msgid)) == [11, 21])

        // One proxy is in a loop (watched for hang-up), the other is not.
        let watcher = ResidentThread(name: "xproc-owner-watcher")
        defer { watcher.stop() }
        let watchedInvalidated = Shared(false)
        let unwatchedInvalidated = Shared(false)
        watched.setInvalidationHandler { _ in watchedInvalidated.value = true }
        unwatched.setInvalidationHandler { _ in unwatchedInvalidated.value = true }
        watcher.runLoop.add(watched, forMode: .default)

        child.kill(SIGKILL)
        #expect(child.wait() == .signalled(SIGKILL))

        // Without any send, the watched proxy learns of the death from its loop.
        #expect(waitUntil { watchedInvalidated.value }, "the invalidation handler of a proxy in a loop did not run")
        #expect(!watched.isValid)
        #expect(throws: PortError.invalidPort) {
            try watched.send(msgid: 11, timeout: waitLimit)
        }
        // The unwatched proxy learns it on its next send, which must not hang.
        let start = ContinuousClock.now
        #expect(throws: PortError.invalidPort) {
            try unwatched.send(msgid: 21, components: [.data(Data("anyone?".utf8))], timeout: .seconds(30))
        }
        #expect(ContinuousClock.now - start < .seconds(30), "send waited for its whole deadline on a dead port")
        #expect(unwatchedInvalidated.value, "the invalidation handler did not run when send found the owner dead")
        #expect(!unwatched.isValid)
    }

    // MARK: 7

    @Test("§3.57 descriptor exhaustion in a child: typed errors, the frame it could not take discarded and reported as its own exhaustion, the connection kept, no leak")
    func descriptorExhaustion() async throws {
        let child = try ChildProcess(portPeer, ["exhaust"])
        let exit = await offThePool { child.finish(timeout: .seconds(30)) }
        #expect(exit == .exited(0), "PortPeer exhaust: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        let output = child.output
        #expect(output.contains("MessagePort() needs no descriptor: delivered in-process"), "\(output)")
        #expect(output.contains("makeSendRight() threw resource exhausted"), "\(output)")
        #expect(output.contains("transport errors: [\(PortError.resourceExhausted(errno: EMFILE))]"), "\(output)")
        #expect(output.contains("the connection is kept"), "\(output)")
        #expect(output.contains("exhaust ok"), "\(output)")
    }

    // MARK: - Send rights

    @Test("a holder that lets go of a forwarded send right does not cut off the other holders")
    func invalidatingOneHolderKeepsTheOthers() throws {
        let a = try ReceivingPort(name: "holders-A")
        defer { a.stop() }
        let b = try ReceivingPort(name: "holders-B")
        defer { b.stop() }
        // First holder: a proxy for A's port. It forwards A's port to B: B's proxy is a copy of
        // the same send right (the same socket), as in another process.
        let first = try MessagePort(sendRight: a.port.makeSendRight())
        let toB = try MessagePort(sendRight: b.port.makeSendRight())
        try toB.send(msgid: 1, components: [.port(first)], timeout: waitLimit)
        let second = try #require(b.waitForMessages(1)?.first?.port(at: 0))
        #expect(second.isProxy)

        // The first holder is done with its right (spec §4.3: the forwarder may drop its own).
        first.invalidate()
        #expect(!first.isValid)
        #expect(second.isValid)
        // The second holder still reaches A.
        #expect(throws: Never.self) {
            try second.send(msgid: 2, components: [.data(Data("still here".utf8))], timeout: waitLimit)
        }
        #expect(a.waitForMessages(1)?.first?.text == "still here", "A got \(a.msgids)")
        #expect(a.port.connectionCount == 1, "the connection stays while a holder remains")
    }

    @Test("MessagePort(sendRight:) accepts only AF_UNIX SOCK_SEQPACKET sockets")
    func sendRightValidation() throws {
        let pipeEnds = closeOnExecPipe()
        defer { close(pipeEnds.read); close(pipeEnds.write) }
        #expect(throws: PortError.notASendRight) { try MessagePort(sendRight: pipeEnds.read) }

        var stream: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &stream) == 0)
        defer { close(stream[0]); close(stream[1]) }
        #expect(throws: PortError.notASendRight) { try MessagePort(sendRight: stream[0]) }

        let local = try MessagePort()
        #expect(!local.isProxy)
        let right = try local.makeSendRight()
        #expect(fcntl(right, F_GETFD) & FD_CLOEXEC != 0, "a send right is close-on-exec unless asked otherwise")
        let proxy = try MessagePort(sendRight: right)
        #expect(proxy.isProxy)
        #expect(local.connectionCount == 1)
        let inheritable = try local.makeSendRight(inheritable: true)
        #expect(fcntl(inheritable, F_GETFD) & FD_CLOEXEC == 0, "inheritable: true clears close-on-exec")
        close(inheritable)
        local.invalidate()
        #expect(throws: PortError.invalidPort) { try local.makeSendRight() }
    }
}

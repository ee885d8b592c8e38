// Guarantees §3.32: a frame that came through a socket is never reported as sent within this
// process; credentials that claim this process over a connection another process made can only
// be forged (CAP_SYS_ADMIN: as root, PortPeerC sends explicit SCM_CREDENTIALS), and are refused
// and reported with who made the connection.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

// Serialized: the §3.60 test sends this process's own frames over a client's connection while
// the §3.32 tests forge them.
@Suite("§3.32 frames through a socket", .serialized)
struct ForgedSenderTests {
    @Test("§3.32 a frame this process sent through a send right (socketpair or named) has a sender: this process, pinned")
    func ownFramesHaveASender() throws {
        let own = MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid())
        let receiver = try ReceivingPort(name: "own-frames")
        defer { receiver.stop() }
        let proxy = try MessagePort(sendRight: receiver.port.makeSendRight())
        try proxy.send(msgid: 1, timeout: waitLimit)
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender == own)
        #expect(message.sender?.process == (try PinnedProcess(pid: getpid())))

        let name = uniqueName("own-named")
        let named = try ReceivingPort(publishedAs: name)
        defer { named.stop() }
        try MessagePort.connect(to: name).send(msgid: 2, timeout: waitLimit)
        #expect(named.waitForMessages(1)?.first?.sender == own)
        // A message sent within the process has none.
        try named.port.send(msgid: 3, timeout: waitLimit)
        #expect(named.waitForMessages(2)?.last?.sender == nil)
    }

    @Test("§3.60 a client gives its own named connection as a reply port and the owner replies into it: the reply is the owner's own, delivered with this process as its sender, not reported as forged")
    func ownReplyOverAClientsConnection() throws {
        let name = uniqueName("reply-to-self")
        let replied = Shared(false)
        let receiver = try ReceivingPort(publishedAs: name) { message in
            guard message.msgid == 9, let replyPort = message.replyPort else { return }
            do {
                try replyPort.send(msgid: 10, timeout: .seconds(5))
                replied.value = true
            } catch {
                Issue.record("the reply threw \(error)")
            }
        }
        defer { receiver.stop() }
        let client = try peer(["reply-to-self", name])
        defer { client.kill(SIGKILL) }
        let messages = try #require(receiver.waitForMessages(2), "\(client.output) \(receiver.errors.value)")
        #expect(replied.value)
        #expect(messages.map(\.msgid) == [9, 10])
        #expect(messages[0].sender?.pid == client.pid)
        #expect(messages[1].sender?.pid == getpid(), "the reply came back over the client's connection")
        #expect(messages[1].sender?.process == (try PinnedProcess(pid: getpid())))
        #expect(receiver.errors.value.isEmpty, "\(receiver.errors.value)")
        #expect(receiver.port.connectionCount == 1, "the client keeps its connection")
    }

    @Test("§3.32 a frame claiming this process's pid over a connection another process made is refused, reported with the connecting process, nothing delivered",
          .enabled(if: geteuid() == 0, "forging a pid in SCM_CREDENTIALS needs CAP_SYS_ADMIN"))
    func forgedFrame() throws {
        let name = uniqueName("forged-frame")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let forger = try ChildProcess(portPeerC, ["forge", name, "\(getpid())"])
        #expect(forger.finish() == .exited(0), "\(forger.output)")
        #expect(forger.output.contains("welcome"), "\(forger.output)")
        #expect(forger.output.contains("forgery sent"), "the kernel lets root claim any live pid: \(forger.output)")
        #expect(forger.output.contains("dropped"), "\(forger.output)")
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .forgedCredentials)
        #expect(report.sender?.pid == getpid(), "what the frame claimed")
        #expect(report.connector?.pid == forger.pid, "who really connected")
        #expect(receiver.messages.value.isEmpty)
    }

    @Test("§3.32 a HELLO claiming the owner's pid from another process is denied and reported",
          .enabled(if: geteuid() == 0, "forging a pid in SCM_CREDENTIALS needs CAP_SYS_ADMIN"))
    func forgedHello() throws {
        let name = uniqueName("forged-hello")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let liar = try ChildProcess(portPeerC, ["lie", name, "\(getpid())"])
        #expect(liar.finish() == .exited(0), "\(liar.output)")
        #expect(liar.output.contains("lie sent"), "\(liar.output)")
        #expect(liar.output.contains("answer: denied"), "\(liar.output)")
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .forgedCredentials)
        #expect(report.connector?.pid == liar.pid)
        #expect(receiver.messages.value.isEmpty)
    }
}

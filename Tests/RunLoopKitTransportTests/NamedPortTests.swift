// Guarantees §3.25–27: names, access, senders. Real processes (PortPeer, started by the test as
// separate executables, so that neither side's RunLoopKit code spawned the other), real
// credentials: as root, a child drops to nobody (65534:65534) for the access cases.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Synchronization
import Testing
@testable import RunLoopKit

let nobody: UInt32 = 65534
let nogroup: UInt32 = 65534
var isRoot: Bool { geteuid() == 0 }

/// A name no other test (or test run) uses.
func uniqueName(_ label: String) -> String {
    "rlk-test-\(getpid())-\(label)-\(UInt32.random(in: 0...UInt32.max))"
}

/// PortPeer in `mode`, optionally as nobody.
func peer(_ arguments: [String], asNobody: Bool = false) throws -> ChildProcess {
    try ChildProcess(portPeer, asNobody ? ["as", "\(nobody)", "\(nogroup)"] + arguments : arguments)
}

extension ReceivingPort {
    /// A receiving port published as `name`.
    convenience init(publishedAs name: String, access: MessagePort.Access = .sameUser,
                     reply: (@Sendable (MessagePort.Message) -> Void)? = nil) throws {
        try self.init(name: "named", reply: reply)
        try port.publish(as: name, access: access)
    }
}

@Suite("§3.25 names")
struct NamedPortNameTests {
    @Test("§3.25 publish(as:) then connect(to:) in the same process: delivered, sender this process (§3.27, §3.32)")
    func publishAndConnectInProcess() throws {
        let name = uniqueName("basic")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        #expect(receiver.port.publishedName == name)
        let proxy = try MessagePort.connect(to: name)
        #expect(proxy.isProxy)
        try proxy.send(msgid: 5, components: [.data(Data("hi".utf8))], timeout: waitLimit)
        let messages = try #require(receiver.waitForMessages(1))
        #expect(messages[0].msgid == 5 && messages[0].text == "hi")
        #expect(messages[0].sender == MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid()),
                "a frame through a socket always has a sender")
        try receiver.port.send(msgid: 6, timeout: waitLimit)
        let local = try #require(receiver.waitForMessages(2))
        #expect(local[1].sender == nil)
    }

    @Test("§3.25 a name held by a live port: .nameInUse, in this process and from another")
    func nameInUse() throws {
        let name = uniqueName("held")
        let first = try ReceivingPort(publishedAs: name)
        defer { first.stop() }
        let second = try MessagePort()
        defer { second.invalidate() }
        #expect(throws: PortError.nameInUse(name)) { try second.publish(as: name) }
        let child = try peer(["publish-name", name])
        #expect(child.waitForOutput("error \(PortError.nameInUse(name))"), "\(child.output)")
    }

    @Test("§3.25 invalidate() and unpublish() free the name at once")
    func freedByInvalidateAndUnpublish() throws {
        let name = uniqueName("free")
        let first = try MessagePort()
        try first.publish(as: name)
        first.unpublish()
        #expect(throws: PortError.nameNotFound(name)) { _ = try MessagePort.connect(to: name) }
        let second = try MessagePort()
        try second.publish(as: name)
        second.invalidate()
        #expect(second.publishedName == nil)
        let third = try ReceivingPort(publishedAs: name)
        defer { third.stop() }
        let proxy = try MessagePort.connect(to: name)
        try proxy.send(msgid: 1, timeout: waitLimit)
        #expect(third.waitForMessages(1) != nil)
        first.invalidate()
    }

    @Test("§3.25 the owner SIGKILLed: a new process publishes the name at once and clients reach it (no stale socket)")
    func freedWhenOwnerDies() throws {
        let name = uniqueName("killed")
        let owner = try peer(["serve-name", name, "same-user", "reply"])
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let mine = try MessagePort()
        defer { mine.invalidate() }
        #expect(throws: PortError.nameInUse(name)) { try mine.publish(as: name) }
        owner.kill(SIGKILL)
        #expect(owner.wait() == .signalled(SIGKILL))
        // The kernel released the abstract address with the process: the first try succeeds.
        let successor = try peer(["serve-name", name, "same-user", "reply"])
        #expect(successor.waitForOutput("published"), "\(successor.output)")
        let client = try peer(["request-name", name, "3"])
        #expect(client.finish() == .exited(0), "\(client.output)")
        #expect(client.output.contains("ok 3"))
    }

    @Test("§3.25 connect to an unknown name: .nameNotFound")
    func unknownName() {
        let name = uniqueName("nobody-home")
        #expect(throws: PortError.nameNotFound(name)) { _ = try MessagePort.connect(to: name) }
    }

    @Test("§3.25 names outside 1–100 bytes of [A-Za-z0-9._-] (paths included): .invalidName",
          arguments: ["", String(repeating: "a", count: 101), "a/b", "/run/user/0/x", "../etc", "a b", "é", "x\0y", "@abstract", "name\n"])
    func invalidNames(_ name: String) throws {
        let port = try MessagePort()
        defer { port.invalidate() }
        #expect(throws: PortError.invalidName(name)) { try port.publish(as: name) }
        #expect(throws: PortError.invalidName(name)) { _ = try MessagePort.connect(to: name) }
    }

    @Test("§3.25 the longest names (100 bytes, hashed address) and the odd ones ('.', '-') work")
    func edgeNames() throws {
        let unique = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        let longest = unique + String(repeating: "z", count: 100 - unique.count)
        for name in [longest, ".", "-", "_.-"] {
            let receiver = try ReceivingPort(publishedAs: name)
            defer { receiver.stop() }
            let proxy = try MessagePort.connect(to: name)
            try proxy.send(msgid: 9, timeout: waitLimit)
            #expect(receiver.waitForMessages(1) != nil, "\(name)")
        }
    }

    @Test("§3.25 two unrelated processes exchange request/replies by name")
    func unrelatedProcesses() throws {
        let name = uniqueName("unrelated")
        let count = underSanitizer ? 1_000 : 10_000
        let server = try peer(["serve-name", name, "same-user", "reply"])
        #expect(server.waitForOutput("published"), "\(server.output)")
        let client = try peer(["request-name", name, "\(count)"])
        #expect(client.finish(timeout: .seconds(120)) == .exited(0), "\(client.output)")
        #expect(client.output.contains("ok \(count)"), "\(client.output)")
    }
}

@Suite("§3.26 access", .enabled(if: geteuid() == 0, "the access cases drop a child to nobody, which needs root"))
struct NamedPortAccessTests {
    @Test("§3.26 .sameUser (root's port): a nobody child's connect throws .accessDenied, nothing delivered")
    func sameUserRefusesOtherUser() throws {
        let name = uniqueName("same-user")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let child = try peer(["connect-name", name], asNobody: true)
        #expect(child.finish() == .exited(0))
        #expect(child.output.contains("error \(PortError.accessDenied)"), "\(child.output)")
        #expect(receiver.waitForError() == .accessDenied)
        #expect(receiver.messages.value.isEmpty)
    }

    @Test("§3.26/§3.27 .users([nobody]): the nobody child connects; sender is its pid, uid, gid")
    func usersAdmitsNamedUser() throws {
        let name = uniqueName("users")
        let receiver = try ReceivingPort(publishedAs: name, access: .users([nobody]))
        defer { receiver.stop() }
        let child = try peer(["connect-name", name], asNobody: true)
        #expect(child.finish() == .exited(0))
        #expect(child.output.contains("connected"), "\(child.output)")
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.text == "hello from \(child.pid)")
        #expect(message.sender == MessagePort.Sender(pid: child.pid, uid: nobody, gid: nogroup))
    }

    @Test("§3.26 .groups([nogroup]) admits the nobody child; .users([1234]) does not")
    func groupsPolicy() throws {
        let name = uniqueName("groups")
        let receiver = try ReceivingPort(publishedAs: name, access: .groups([nogroup]))
        defer { receiver.stop() }
        let child = try peer(["connect-name", name], asNobody: true)
        #expect(child.finish() == .exited(0))
        #expect(child.output.contains("connected"), "\(child.output)")
        #expect(receiver.waitForMessages(1)?.first?.sender?.gid == nogroup)

        let other = uniqueName("users-other")
        let refusing = try ReceivingPort(publishedAs: other, access: .users([1234]))
        defer { refusing.stop() }
        let refused = try peer(["connect-name", other], asNobody: true)
        #expect(refused.finish() == .exited(0))
        #expect(refused.output.contains("error \(PortError.accessDenied)"), "\(refused.output)")
    }

    @Test("§3.26 root is not exempt: a nobody-owned .sameUser port refuses root's connect")
    func rootNotExempt() throws {
        let name = uniqueName("root-refused")
        let owner = try peer(["serve-name", name, "same-user", "reply"], asNobody: true)
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        // Root's own scope is the system's: it names the owner's scope to find a user's port.
        #expect(throws: PortError.nameNotFound(name)) { _ = try MessagePort.connect(to: name) }
        #expect(throws: PortError.accessDenied) { _ = try MessagePort.connect(to: name, publishedBy: nobody) }
        #expect(owner.waitForOutput("transport error: \(PortError.accessDenied)"), "\(owner.output)")
    }

    @Test("§3.26 per frame: a connection handed on (SCM_RIGHTS) to a refused process delivers nothing and is dropped, reported")
    func handedOnConnectionRefused() throws {
        let name = uniqueName("handed-on")
        let receiver = try ReceivingPort(publishedAs: name, access: .users([0]))
        defer { receiver.stop() }
        let proxy = try MessagePort.connect(to: name)
        try proxy.send(msgid: 1, timeout: waitLimit)
        #expect(receiver.waitForMessages(1) != nil)
        let right = try proxy.makeSendRight(inheritable: false)
        defer { close(right) }
        let child = try ChildProcess(portPeer, ["as", "\(nobody)", "\(nogroup)", "send-right", "3"], inherit: [(right, 3)])
        #expect(child.finish() == .exited(0))
        #expect(child.output.contains("dropped"), "the owner dropped the connection: \(child.output)")
        #expect(receiver.waitForError() == .accessDenied)
        #expect(receiver.msgids == [1], "nothing the refused process sent was delivered")
    }
}

@Suite("§3.27 senders")
struct NamedPortSenderTests {
    @Test("§3.27 sender is the process that sent the frame, also through a send right passed on to a third process")
    func senderOfPassedOnRight() throws {
        let name = uniqueName("relay")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        defer { receiver.stop() }
        let asNobody = isRoot
        let relay = try peer(["relay-name", name], asNobody: asNobody)
        #expect(relay.finish(timeout: .seconds(30)) == .exited(0), "\(relay.output)")
        let messages = try #require(receiver.waitForMessages(2))
        let line = try #require(relay.output.split(separator: "\n").first { $0.hasPrefix("relay ") })
        let third = try #require(Int32(line.split(separator: " ")[3]))
        let uid = asNobody ? nobody : geteuid(), gid = asNobody ? nogroup : getegid()
        #expect(messages[0].sender == MessagePort.Sender(pid: relay.pid, uid: uid, gid: gid))
        #expect(messages[1].text == "third \(third)")
        #expect(messages[1].sender == MessagePort.Sender(pid: third, uid: uid, gid: gid),
                "the third process, not the one that connected: \(String(describing: messages[1].sender))")
    }

    @Test("§3.27 sender on a plain send right (socketpair) is the child that wrote the frame")
    func senderOnSendRight() throws {
        let receiver = try ReceivingPort(name: "sender-right")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let child = try ChildProcess(portPeer, ["send-right", "3"], inherit: [(right, 3)])
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender == MessagePort.Sender(pid: child.pid, uid: geteuid(), gid: getegid()))
        child.kill(SIGKILL)
        _ = child.wait()
    }
}

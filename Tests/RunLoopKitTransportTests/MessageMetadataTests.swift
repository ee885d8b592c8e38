// The METADATA section on the wire (port-message-frame.md §3.5) and the core's context hook,
// with a test propagator that carries a task-local id: what RunLoopKitTracing does with a
// ServiceContext, without swift-distributed-tracing.

import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// Carries `TestContext.id` in the field "test-trace". Installed once for this test process; it
/// attaches nothing while no id is set, so the other tests' messages are unchanged.
final class TestPropagator: MessageContextPropagator {
    static let installed: Bool = MessageContext.install(TestPropagator())

    func metadataForSend() -> MessageMetadata? {
        TestContext.id.map { MessageMetadata([.init(key: "test-trace", value: $0)]) }
    }

    func withContext<Result>(of metadata: MessageMetadata?, _ body: () throws -> Result) rethrows -> Result {
        try TestContext.$id.withValue(metadata?["test-trace"], operation: body)
    }

    func withSpan<Result>(named name: String, isClient: Bool, _ body: () async throws -> Result) async rethrows -> Result {
        try await body()
    }
}

enum TestContext {
    @TaskLocal static var id: String?
}

@Suite("Message metadata on the wire", .timeLimit(.minutes(2)))
struct MessageMetadataTests {
    init() {
        #expect(TestPropagator.installed || MessageContext.isInstalled)
    }

    @Test("a proxy send within a context writes the METADATA flag and section; without one, the frame of before")
    func proxyWritesMetadata() throws {
        let (mine, theirs) = rawSeqPacketPair()
        defer { close(mine) }
        let proxy = try MessagePort(sendRight: theirs)
        defer { proxy.invalidate() }
        func receive() throws -> PortFrame {
            var buffer = [UInt8](repeating: 0, count: MessagePort.maximumFrameSize + 1)
            let length = buffer.withUnsafeMutableBytes { recv(mine, $0.baseAddress, $0.count, 0) }
            return try PortFrame.decode(buffer.prefix(max(length, 0)), descriptorCount: 0)
        }
        try TestContext.$id.withValue("trace-1") {
            try proxy.send(msgid: 1, components: [.data(Data("hi".utf8))], timeout: waitLimit)
        }
        let traced = try receive()
        #expect(traced.metadata == MessageMetadata([.init(key: "test-trace", value: "trace-1")]))
        #expect(traced.components == [.data(Array("hi".utf8))])
        // Re-encoded, the frame has the flag bit 1 and the section after the body.
        let bytes = try traced.encode()
        #expect(bytes[5] == 0x02)
        #expect(Array(bytes.suffix(2 + 4 + 10 + 7)) == [1, 0, 10, 0] + Array("test-trace".utf8) + [7, 0] + Array("trace-1".utf8))

        try proxy.send(msgid: 2, components: [.data(Data("hi".utf8))], timeout: waitLimit)
        let plain = try receive()
        #expect(plain.metadata == nil)
        #expect(try plain.encode() == PortFrame(msgid: 2, components: [.data(Array("hi".utf8))], hasReplyPort: false).encode())
    }

    @Test("§3.49 (core) a local handler and a handler across a send right run within the sender's context")
    func handlerRunsWithinSendersContext() throws {
        // By msgid: a send right's frames and local sends are not ordered with each other.
        let seen = Shared<[UInt32: String]>([:])
        let receiver = try ReceivingPort(name: "metadata-local") { message in
            seen.update { $0[message.msgid] = TestContext.id ?? "none" }
        }
        defer { receiver.stop() }
        let proxy = try MessagePort(sendRight: try receiver.port.makeSendRight())
        defer { proxy.invalidate() }
        try TestContext.$id.withValue("local") { try receiver.port.send(msgid: 1, timeout: waitLimit) }
        try TestContext.$id.withValue("remote") { try proxy.send(msgid: 2, components: [.data(Data([1]))], timeout: waitLimit) }
        try receiver.port.send(msgid: 3, timeout: waitLimit)
        #expect(receiver.waitForMessages(3) != nil)
        #expect(seen.value == [1: "local", 2: "remote", 3: "none"])
        let carried = Dictionary(uniqueKeysWithValues: receiver.messages.value.map { ($0.msgid, $0.metadata?["test-trace"]) })
        #expect(carried == [1: "local", 2: "remote", 3: nil])
    }

    @Test("§3.49 (core) the C peer echoes a request's metadata: the reply's handler runs within the request's context")
    func cPeerEchoesMetadata() throws {
        let seen = Shared<[String?]>([])
        let replies = try ReceivingPort(name: "metadata-c-serve") { _ in seen.update { $0.append(TestContext.id) } }
        defer { replies.stop() }
        let (receiveEnd, sendEnd) = rawSeqPacketPair()
        let child = try ChildProcess(portPeerC, ["serve", "3"], inherit: [(receiveEnd, 3)])
        close(receiveEnd)
        let cPort = try MessagePort(sendRight: sendEnd)
        try TestContext.$id.withValue("from-swift") {
            try cPort.send(msgid: 2000, components: [.data(Data("hello from Swift".utf8))], from: replies.port,
                           timeout: waitLimit)
        }
        let answer = try #require(replies.waitForMessages(1), "no reply from PortPeerC\n\(child.output)")[0]
        #expect(answer.msgid == 2001)
        #expect(answer.metadata?["test-trace"] == "from-swift")
        #expect(seen.value == ["from-swift"])
        try answer.port(at: 1)?.send(msgid: 2002, components: [.data(Data("bye".utf8))], timeout: waitLimit)
        let exit = child.finish()
        #expect(exit == .exited(0), "PortPeerC serve: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("metadata test-trace=from-swift"), "\(child.output)")
    }

    @Test("a malformed METADATA section drops the connection as any malformed frame: .badMetadata")
    func malformedMetadataDropsConnection() throws {
        let receiver = try ReceivingPort(name: "metadata-bad")
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        defer { close(sendRight) }
        // One DATA "hi", METADATA set, a section whose field count is 0.
        var frame = try PortFrame(msgid: 7, components: [.data(Array("hi".utf8))], hasReplyPort: false).encode()
        frame[5] = 0x02
        frame += [0, 0]
        #expect(frame.withUnsafeBytes { send(sendRight, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == frame.count)
        #expect(receiver.waitForError() == .malformedFrame(.badMetadata))
        #expect(waitUntil { receiver.port.connectionCount == 0 })
        #expect(receiver.messages.value.isEmpty)
    }
}

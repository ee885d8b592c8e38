// The METADATA section on the wire (port-message-frame.md §3.6). No propagator is installed
// here: the whole package's tests run in one process, where RunLoopKitTracingTests installs
// PortTracing's (the first installation wins). These tests send metadata through the internal
// send path a propagator feeds, and read what arrives; the handler's context is
// RunLoopKitTracingTests' subject.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

extension MessagePort {
    /// Sends through this proxy as a send within a context does: with `metadata` in the frame.
    func send(msgid: UInt32, data: Data, from replyPort: MessagePort? = nil, metadata: MessageMetadata) throws(PortError) {
        try sendRemote(msgid: msgid, payload: .data(data), replyPort: replyPort, metadata: metadata,
                       deadline: { .now + waitLimit })
    }
}

func traceMetadata(_ id: String) -> MessageMetadata {
    MessageMetadata([.init(key: "test-trace", value: id)])
}

@Suite("Message metadata on the wire", .timeLimit(.minutes(2)))
struct MessageMetadataTests {
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
        try proxy.send(msgid: 1, data: Data("hi".utf8), metadata: traceMetadata("trace-1"))
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

    @Test("§3.49 (core) a frame's metadata reaches the message its handler gets; a frame without it, none")
    func receivedMetadata() throws {
        let receiver = try ReceivingPort(name: "metadata-received")
        defer { receiver.stop() }
        let proxy = try MessagePort(sendRight: try receiver.port.makeSendRight())
        defer { proxy.invalidate() }
        try proxy.send(msgid: 1, data: Data([1]), metadata: traceMetadata("remote"))
        try proxy.send(msgid: 2, components: [.data(Data([2]))], timeout: waitLimit)
        let messages = try #require(receiver.waitForMessages(2))
        #expect(messages.map(\.metadata) == [traceMetadata("remote"), nil])
        #expect(messages.map(\.data) == [Data([1]), Data([2])])
    }

    @Test("§3.49 (core) the C peer, written from the spec, reads a request's metadata and echoes it in the reply")
    func cPeerEchoesMetadata() throws {
        let replies = try ReceivingPort(name: "metadata-c-serve")
        defer { replies.stop() }
        let (receiveEnd, sendEnd) = rawSeqPacketPair()
        let child = try ChildProcess(portPeerC, ["serve", "3"], inherit: [(receiveEnd, 3)])
        close(receiveEnd)
        let cPort = try MessagePort(sendRight: sendEnd)
        try cPort.send(msgid: 2000, data: Data("hello from Swift".utf8), from: replies.port,
                       metadata: traceMetadata("from-swift"))
        let answer = try #require(replies.waitForMessages(1), "no reply from PortPeerC\n\(child.output)")[0]
        #expect(answer.msgid == 2001)
        #expect(answer.metadata?["test-trace"] == "from-swift")
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

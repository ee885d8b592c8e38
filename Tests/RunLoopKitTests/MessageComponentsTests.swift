// A message keeps one Data component without an array (MessagePort.Message.Payload): every
// accessor must read the same components, whichever way the message was built and sent.

import FoundationEssentials
import RunLoopKit
import Testing

@Suite("Message components")
struct MessageComponentsTests {
    /// Sends `components` and returns the message as `messages()` hands it over.
    private func roundTrip(_ components: [MessagePort.Message.Component],
                           from replyPort: MessagePort? = nil) async throws -> MessagePort.Message {
        let port = try MessagePort()
        defer { port.invalidate() }
        try port.send(msgid: 9, components: components, from: replyPort, timeout: .seconds(5))
        var iterator = port.messages().makeAsyncIterator()
        let message = try #require(await iterator.next())
        #expect(message.msgid == 9)
        return message
    }

    @Test("one Data component reads back through components, data and data(at:)")
    func singleData() async throws {
        let bytes = Data("payload".utf8)
        let message = try await roundTrip([.data(bytes)])
        #expect(message.components.count == 1)
        guard case .data(let read) = message.components.first else {
            Issue.record("the component is not Data: \(message)")
            return
        }
        #expect(read == bytes)
        #expect(message.data == bytes)
        #expect(message.data(at: 0) == bytes)
        #expect(message.data(at: 1) == nil)
        #expect(message.data(at: -1) == nil)
        #expect(message.port(at: 0) == nil)
        #expect(message.description == "Message(msgid: 9, components: [data(7 bytes)])")
    }

    @Test("several components keep their order and kinds; a sender's later change to its array is not seen")
    func severalComponents() async throws {
        let carried = try MessagePort()
        defer { carried.invalidate() }
        var components: [MessagePort.Message.Component] = [.data(Data([1])), .port(carried), .data(Data([2, 3]))]
        let port = try MessagePort()
        defer { port.invalidate() }
        try port.send(msgid: 9, components: components, timeout: .seconds(5))
        components.removeAll()
        var iterator = port.messages().makeAsyncIterator()
        let message = try #require(await iterator.next())
        #expect(message.components.count == 3)
        #expect(message.data == Data([1]))
        #expect(message.data(at: 0) == Data([1]))
        #expect(message.port(at: 1) == carried)
        #expect(message.data(at: 1) == nil)
        #expect(message.data(at: 2) == Data([2, 3]))
        #expect(message.port(at: 3) == nil)
    }

    @Test("no components, and a single port component, read back as sent")
    func emptyAndSinglePort() async throws {
        let empty = try await roundTrip([])
        #expect(empty.components.isEmpty)
        #expect(empty.data == nil)
        #expect(empty.data(at: 0) == nil)

        let carried = try MessagePort()
        defer { carried.invalidate() }
        let single = try await roundTrip([.port(carried)])
        #expect(single.components.count == 1)
        #expect(single.port(at: 0) == carried)
        #expect(single.data == nil)
    }

    @Test("assigning components to a received single-Data message replaces them")
    func assigningComponents() async throws {
        var message = try await roundTrip([.data(Data([7]))])
        message.components.append(.data(Data([8])))
        #expect(message.components.count == 2)
        #expect(message.data(at: 0) == Data([7]))
        #expect(message.data(at: 1) == Data([8]))
        message.components = []
        #expect(message.data == nil)
        #expect(message.components.isEmpty)
    }

    @Test("a message built with init keeps its components, and one Data sent from async code arrives whole")
    func builtAndAsync() async throws {
        let built = MessagePort.Message(msgid: 1, components: [.data(Data([4, 5]))])
        #expect(built.data == Data([4, 5]))
        #expect(built.components.count == 1)

        let port = try MessagePort()
        defer { port.invalidate() }
        try await port.send(msgid: 2, components: [.data(Data([6]))])
        var iterator = port.messages().makeAsyncIterator()
        let message = try #require(await iterator.next())
        #expect(message.msgid == 2)
        #expect(message.data == Data([6]))
        #expect(message.components.count == 1)
    }
}

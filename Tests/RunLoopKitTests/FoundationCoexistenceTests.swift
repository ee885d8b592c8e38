// Guarantees §3.18: a file that imports both Foundation and RunLoopKit uses every
// RunLoopKit name unqualified — in type and in expression positions. This file
// compiling is half of the test; the tests below are the other half.

import Foundation
import RunLoopKit
import Testing

/// Type positions: a delegate conforming to the nested protocol, unqualified.
final class CoexistenceDelegate: MessagePort.Delegate, @unchecked Sendable {
    private let lock = NSLock()
    private var _messages: [MessagePort.Message] = []
    var messages: [MessagePort.Message] { lock.withLock { _messages } }
    func handlePortMessage(_ message: MessagePort.Message) {
        lock.withLock { _messages.append(message) }
    }
}

/// Every RunLoopKit type, unqualified, in type position.
struct CoexistenceTypes {
    var loop: ThreadRunLoop?
    var mode: ThreadRunLoop.Mode = .default
    var result: ThreadRunLoop.RunResult = .finished
    var activity: ThreadRunLoop.Activity = .entry
    var port: MessagePort?
    var message: MessagePort.Message?
    var component: MessagePort.Message.Component?
    var delegate: (any MessagePort.Delegate)?
    var portError: PortError?
    var resident: ResidentThread?
    var failure: ResidentThread.Failure?
    var source: RunLoopSource?
    var timer: RunLoopTimer?
    var observer: RunLoopObserver?
    var fdSource: FileDescriptorSource?
    var fdEvents: FileDescriptorSource.Events = .readable
}

@Suite("§3.18 Foundation coexistence")
struct FoundationCoexistenceTests {

    @Test("§3.18 RunLoopKit names are usable unqualified next to Foundation (expression positions)")
    func namesAreUnqualifiedNextToFoundation() throws {
        var types = CoexistenceTypes()
        types.port = try MessagePort(queueLimit: 4)
        types.message = MessagePort.Message(msgid: 1, components: [.data(Data("x".utf8))], replyPort: nil)
        types.component = .data(Data())
        types.portError = PortError.invalidPort
        types.failure = ResidentThread.Failure.finished
        types.source = RunLoopSource {}
        types.timer = RunLoopTimer(interval: .seconds(10), repeats: false) { _ in }
        types.observer = RunLoopObserver(activities: ThreadRunLoop.Activity.allActivities) { _, _ in }
        types.fdSource = FileDescriptorSource(fileDescriptor: 0, events: FileDescriptorSource.Events.readable) { _, _ in }
        types.mode = ThreadRunLoop.Mode("coexist")
        let delegate = CoexistenceDelegate()
        types.delegate = delegate
        types.port?.delegate = delegate
        #expect(types.port?.delegate === delegate)
        #expect(types.mode.rawValue == "coexist")
        #expect(types.portError == .invalidPort)
        types.fdSource?.invalidate()
        types.timer?.invalidate()
        types.port?.invalidate()
        // Foundation's own names still mean Foundation's types.
        let foundationLoop: RunLoop? = nil
        let foundationThread: Thread? = nil
        #expect(foundationLoop == nil && foundationThread == nil)
    }

    @Test("§3.18 a Foundation Thread runs a ThreadRunLoop; a MessagePort delivers to a delegate on it")
    func foundationThreadRunsThreadRunLoop() throws {
        let port = try MessagePort()
        let delegate = CoexistenceDelegate()
        let loopBox = LockedBox<ThreadRunLoop>()
        let resultBox = LockedBox<ThreadRunLoop.RunResult>()
        let thread = Thread {
            let loop = ThreadRunLoop.current
            port.delegate = delegate
            loop.add(port, forMode: .default)
            loopBox.value = loop
            resultBox.value = loop.run(mode: .default, for: .seconds(20), returnAfterSourceHandled: true)
        }
        thread.name = "coexist"
        thread.start()
        #expect(waitUntil { loopBox.value != nil })
        try port.send(msgid: 1000, components: [.data(Data("hello".utf8))], timeout: .seconds(5))
        #expect(waitUntil { resultBox.value != nil })
        #expect(resultBox.value == .handledSource)
        let messages = delegate.messages
        #expect(messages.map(\.msgid) == [1000])
        if case .data(let d)? = messages.first?.components.first {
            #expect(String(decoding: d, as: UTF8.self) == "hello")
        } else {
            Issue.record("missing data component")
        }
        withExtendedLifetime(delegate) {}
        port.invalidate()
    }

    @Test("§3.18 ResidentThread and Foundation's RunLoop coexist in one process")
    func residentThreadNextToFoundationRunLoop() throws {
        let resident = ResidentThread(name: uniqueThreadName("co-rt"))
        defer { resident.stop() }
        let box = LockedBox<String>()
        try resident.perform(waitUntilDone: true) {
            box.value = Thread.current.name ?? ""
            _ = RunLoop.current  // Foundation's loop of the same thread, a different type
        }
        #expect(box.value != nil)
        let failure: ResidentThread.Failure? = nil
        #expect(failure == nil)
    }
}

/// A lock-protected optional box (Foundation flavour, to use NSLock here).
final class LockedBox<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var _value: T?
    var value: T? {
        get { lock.withLock { _value } }
        set { lock.withLock { _value = newValue } }
    }
}

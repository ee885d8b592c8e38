#if Logging
import Glibc
import InMemoryLogging
import Logging
import RunLoopKit
import RunLoopKitLogging
import Synchronization
import Testing

/// A logger that keeps its records, at trace level so the test sees every one.
private func recordingLogger() -> (Logger, InMemoryLogHandler) {
    var handler = InMemoryLogHandler()
    handler.logLevel = .trace
    let logger = Logger(label: "loop-health-test") { _ in handler }
    return (logger, handler)
}

/// Polls until `condition` holds or a generous hang guard passes.
private func waitUntil(_ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(60)
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(1_000)
    }
    return true
}

/// Busy-blocks the calling callout for `duration` (a slow callout).
private func block(for duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end { usleep(1_000) }
}

@Suite("RunLoopKitLogging: loop health as swift-log records")
struct LoopHealthLoggerTests {
    @Test("a slow callout is a debug record with the loop's thread name and the callout's kind, label, mode, msgid and duration")
    func slowCalloutRecord() throws {
        let (logger, records) = recordingLogger()
        let thread = ResidentThread(name: "log-slow")
        defer { thread.stop() }
        LoopHealthLogger(logger: logger).reportSlowCallouts(of: thread.runLoop, threshold: .milliseconds(200))
        let port = try MessagePort()
        port.label = "requests"
        port.setHandler { _ in block(for: .milliseconds(300)) }
        thread.runLoop.add(port, forMode: .default)
        try port.send(msgid: 9, timeout: .seconds(5))
        #expect(waitUntil { !records.entries.isEmpty })
        let record = try #require(records.entries.first)
        #expect(record.level == .debug)
        #expect(record.message == "slow callout")
        #expect(record.metadata["thread"] == "log-slow")
        #expect(record.metadata["thread.id"] == "\(thread.runLoop.threadID)")
        #expect(record.metadata["callout.kind"] == "port")
        #expect(record.metadata["callout.label"] == "requests")
        #expect(record.metadata["callout.msgid"] == "9")
        #expect(record.metadata["callout.mode"] == "\(ThreadRunLoop.Mode.default.rawValue)")
        let milliseconds = record.metadata["callout.duration_ms"].flatMap { Double("\($0)") }
        #expect(milliseconds.map { $0 >= 300 } == true, "\(String(describing: record.metadata["callout.duration_ms"]))")
        port.invalidate()
    }

    @Test("a hang is an info record with the stuck loop's thread name and the callout it is stuck in")
    func hangRecord() throws {
        let (logger, records) = recordingLogger()
        let thread = ResidentThread(name: "log-hang")
        defer { thread.stop() }
        let watch = LoopHealthLogger(logger: logger).makeHangWatch(loops: [thread.runLoop], threshold: .milliseconds(300))
        defer { watch.stop() }
        let source = RunLoopSource { _ = waitUntil { !records.entries.isEmpty } }
        source.label = "reload"
        thread.runLoop.add(source, forMode: .default)
        source.signal()
        thread.runLoop.wakeUp()
        #expect(waitUntil { !records.entries.isEmpty })
        let record = try #require(records.entries.first)
        #expect(record.level == .info)
        #expect(record.message == "run loop stuck")
        #expect(record.metadata["thread"] == "log-hang")
        #expect(record.metadata["callout.kind"] == "source")
        #expect(record.metadata["callout.label"] == "reload")
        source.invalidate()
    }

    @Test("a dropped connection is a debug record with the port's label and the error; a refused peer's identity when the report has it")
    func transportErrorRecord() throws {
        let (logger, records) = recordingLogger()
        let health = LoopHealthLogger(logger: logger)
        let thread = ResidentThread(name: "log-transport")
        defer { thread.stop() }
        let port = try MessagePort()
        port.label = "service"
        port.setHandler { _ in }
        health.reportTransportErrors(of: port)
        thread.runLoop.add(port, forMode: .default)
        // A frame that breaks the protocol: four bytes where a header needs more.
        let sendRight = try port.makeSendRight()
        defer { close(sendRight) }
        var garbage: [UInt8] = [1, 2, 3, 4]
        #expect(write(sendRight, &garbage, garbage.count) == 4)
        #expect(waitUntil { !records.entries.isEmpty })
        let record = try #require(records.entries.first)
        #expect(record.level == .debug)
        #expect(record.message == "port dropped a connection")
        #expect(record.metadata["port.label"] == "service")
        #expect(record.metadata["port.error"] == "\(PortError.malformedFrame(.truncatedHeader))",
                "\(String(describing: record.metadata["port.error"]))")
        // The garbage came from this process, through a send right: the kernel says so.
        #expect(record.metadata["peer.pid"] == "\(getpid())")
        #expect(record.metadata["peer.uid"] == "\(getuid())")
        #expect(record.metadata["connector.pid"] == nil)

        let refused = MessagePort.TransportReport(error: .accessDenied,
                                                  sender: MessagePort.Sender(pid: 4242, uid: 1000, gid: 100),
                                                  connector: MessagePort.Sender(pid: 4343, uid: 1001, gid: 101))
        health.logTransportReport(refused, on: port)
        let logged = try #require(records.entries.last)
        #expect(logged.metadata["port.error"] == "\(PortError.accessDenied)")
        #expect(logged.metadata["peer.pid"] == "4242")
        #expect(logged.metadata["peer.uid"] == "1000")
        #expect(logged.metadata["peer.gid"] == "100")
        #expect(logged.metadata["peer.pinned"] == "false")
        #expect(logged.metadata["connector.pid"] == "4343")
        port.invalidate()
    }

    @Test("levels: debug, info, debug by default (swift-log's library guidance); an application may raise them")
    func levels() {
        let defaults = LoopHealthLogger.Levels()
        #expect(defaults == LoopHealthLogger.Levels(slowCallout: .debug, hang: .info, transportError: .debug))
        let (logger, records) = recordingLogger()
        let loud = LoopHealthLogger(logger: logger, levels: .init(slowCallout: .notice, hang: .warning, transportError: .error))
        let loop = ThreadRunLoop.current
        let callout = ThreadRunLoop.Callout(kind: .timer, label: "status", mode: .default, started: .now, duration: .seconds(2))
        loud.logSlowCallout(callout, on: loop)
        loud.logHang(of: loop, in: nil)
        #expect(records.entries.map(\.level) == [.notice, .warning])
        #expect(records.entries.last?.metadata["callout"] == "none")
        #expect(records.entries.first?.metadata["callout.duration_ms"] == "2000.0")
    }
}
#endif

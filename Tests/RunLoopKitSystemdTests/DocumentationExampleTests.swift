// The "Writing a systemd daemon" article's example is Tests/DocExamples/SystemdDaemon/main.swift,
// shown verbatim. These tests check that the article still shows the program's exact text and
// run it as systemd would: a notify socket, a watchdog, a client by name, SIGHUP, SIGTERM.

import Foundation
import PackageTestSupport
import RunLoopKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

@Suite("DocC article: Writing a systemd daemon")
struct SystemdDocumentationExampleTests {
    private static let article = "Sources/RunLoopKitSystemd/RunLoopKitSystemd.docc/WritingASystemdDaemon.md"
    private static let program = "Tests/DocExamples/SystemdDaemon/main.swift"

    @Test("the article shows its example program verbatim")
    func articleShowsTheProgram() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let article = try String(contentsOf: root.appendingPathComponent(Self.article), encoding: .utf8)
        let program = try String(contentsOf: root.appendingPathComponent(Self.program), encoding: .utf8)
        #expect(article.contains("```swift\n" + program + "```\n"),
                "\(Self.article) shows no swift code block identical to \(Self.program)")
    }

    @Test("the example under systemd: READY=1, watchdog pings, a request by name answered, reload, STOPPING=1 on SIGTERM, exit 0")
    func exampleServesAndStops() async throws {
        let socket = try NotifySocket()
        let name = "rlk-doc-greeter.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
        let daemon = try DaemonProcess(executable: "SystemdDaemonExample", environment: [
            "NOTIFY_SOCKET": socket.path,
            "WATCHDOG_USEC": "2000000",     // a ping at once, then every second: few datagrams to queue
        ], arguments: [name])

        let ready = try await socket.waitFor("READY=1", within: patience)
        #expect(ready.contains("STATUS=Serving \(name)"), "\(ready)")
        try await socket.waitFor("WATCHDOG=1", within: patience)

        let greeter = try MessagePort.connect(to: name)
        let reply = try await greeter.sendRequest(msgid: 7, components: [.data(Data("test".utf8))], timeout: patience)
        #expect(reply.msgid == 7)
        #expect(reply.data.map { String(decoding: $0, as: UTF8.self) } == "hello, test")

        daemon.send(SIGHUP)
        try await socket.waitFor("RELOADING=1", within: patience)
        try await socket.waitFor("READY=1", within: patience)

        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1", within: patience)
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "\(exit); stdout: \(daemon.output.withLock { $0 })")
        try await daemon.waitForLine(startingWith: "ready")
        try await daemon.waitForLine(startingWith: "stopped")
        #expect(throws: PortError.nameNotFound(name)) { try MessagePort.connect(to: name) }
    }
}

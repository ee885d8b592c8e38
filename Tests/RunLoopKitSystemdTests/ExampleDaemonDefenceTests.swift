import Foundation
import PackageTestSupport
import RunLoopKit
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// example-daemon against clients that misbehave or ask too much: one that never reads its
/// replies, requests of unbounded work, a SIGTERM with long requests queued, a name squatted
/// before a socket-activated start. The daemon is a child process; the misbehaving client is
/// this process (a reply port on no loop: nothing ever reads its connection).
@Suite("example-daemon under hostile clients")
struct ExampleDaemonDefenceTests {
    @Test("a client that never reads its replies blocks no worker: after 2,000 requests through one unread reply port, another client is served, WATCHDOG=1 goes on, the drops are counted and their log rate-limited")
    func clientThatNeverReads() async throws {
        let socket = try NotifySocket()
        let (config, name) = try daemonConfiguration()
        defer { unlink(config) }
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000"],
                                       arguments: [config])
        try await socket.waitFor("READY=1", within: patience)
        let hostile = try await HostileClient.flood(name, requests: 2000, rounds: 1000)
        // Forget the pings sent so far: the ones waited for below come after the flood.
        while await socket.nextDatagram(before: .now) != nil {}

        let (clientExit, clientOutput) = try await ExampleClientProcess(["--name", name, "--count", "3", "--quiet"]).finish()
        #expect(clientExit == .exited(0), "\(clientOutput)")
        #expect(clientOutput.contains("done: 3 correct replies"), "\(clientOutput)")
        for _ in 0..<3 {
            try await socket.waitFor("WATCHDOG=1", within: patience)
        }

        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        let counts = try #require(Summary(summary), "\(summary)")
        #expect(counts.dropped > 0, "the unread replies were dropped, not waited for: \(summary)")
        #expect(counts.answered + counts.refused + counts.dropped + counts.unanswered == 2003, "every request accounted for: \(summary)")
        #expect(counts.unanswered == 0, "\(summary)")
        let dropLines = daemon.output.withLock { $0 }.filter { $0.contains("dropped") && !$0.hasPrefix("stopped") }
        #expect(!dropLines.isEmpty && dropLines.count < 100, "drops logged, rate-limited: \(dropLines.count) lines")
        withExtendedLifetime(hostile) {}
    }

    @Test("SIGTERM with long requests under way and queued: the drain ends at drain_timeout_ms, what the workers held is refused as 'stopping', and the counts are what the client received; a full worker queue is refused as 'busy', not 'stopping'")
    func drainBoundedWhateverTheLoad() async throws {
        // Each request would take hours: only the drain's deadline can end them.
        let (config, name) = try daemonConfiguration("drain_timeout_ms = 200\nmax_rounds = 1000000000000000\n")
        defer { unlink(config) }
        let socket = try NotifySocket()
        let daemon = try DaemonProcess(environment: ["NOTIFY_SOCKET": socket.path], arguments: [config])
        try await socket.waitFor("READY=1", within: patience)
        // More than the two workers can hold: each a request under way, the rest of the batch
        // its loop took (up to 255) and a full inbox (256).
        let hostile = try await HostileClient.flood(name, requests: 1500, rounds: 10_000_000_000_000)

        let (busyExit, busyOutput) = try await ExampleClientProcess(["--name", name, "--count", "1"]).finish()
        #expect(busyExit == .exited(1), "\(busyOutput)")
        #expect(busyOutput.contains("refused (the daemon is busy"), "a full queue is not a stopping daemon: \(busyOutput)")

        daemon.send(SIGTERM)
        try await socket.waitFor("STOPPING=1", within: patience)
        let exit = await daemon.waitForExit()
        #expect(exit == .exited(0), "the drain is bounded by drain_timeout_ms: \(exit)")
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        let counts = try #require(Summary(summary), "\(summary)")
        #expect(counts.answered == 0, "\(summary)")
        // The flood's refusals queued on its socket before the daemon exited: read them now.
        let received = try await hostile.readReplies(expecting: counts.refused - 1)
        #expect(received.refusals == counts.refused - 1, "refusals counted = refusals received (+ the busy one): \(summary)")
        #expect(received.busy > 0, "the flood was refused as busy once the queues were full")
        #expect(received.reasons.isSubset(of: [1]), "the other refusals say 'stopping' (Wire.Refusal.stopping): \(received.reasons)")
        #expect(counts.refused - 1 + counts.dropped + counts.unanswered == 1500,
                "every request of the flood accounted for: \(summary)")
    }

    @Test("rounds above max_rounds are refused with their reason (the port) or a typed error (the actor), not worked on; other requests are served")
    func roundsBounded() async throws {
        let (config, name) = try daemonConfiguration("max_rounds = 1000000\n")
        defer { unlink(config) }
        let daemon = try DaemonProcess(environment: [:], arguments: [config])
        try await daemon.waitForLine(startingWith: "ready")
        let huge = "\(UInt64(1) << 63)"
        let (portExit, portOutput) = try await ExampleClientProcess(["--name", name, "--count", "1", "--rounds", huge]).finish()
        #expect(portExit == .exited(1), "\(portOutput)")
        #expect(portOutput.contains("request 1: refused (rounds above the daemon's max_rounds)"), "\(portOutput)")
        let (actorExit, actorOutput) = try await ExampleClientProcess(["--name", name, "--count", "1", "--rounds", huge,
                                                                   "--distributed"]).finish()
        #expect(actorExit == .exited(1), "\(actorOutput)")
        #expect(actorOutput.contains("call 1: \(huge) rounds asked, at most 1000000 served"), "\(actorOutput)")
        let (okExit, okOutput) = try await ExampleClientProcess(["--name", name, "--count", "3", "--rounds", "1000000"]).finish()
        #expect(okExit == .exited(0), "the workers are free: \(okOutput)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
        let summary = try await daemon.waitForLine(startingWith: "stopped")
        #expect(summary == "stopped: 3 answered, 1 refused, 0 dropped, 0 unanswered")
    }

    @Test("socket activation of every name the daemon publishes: with NAME and NAME.actor both bound by the unit (and so held from any squatter), the daemon takes each from the passed sockets by its address")
    func activationOfEveryName() async throws {
        let (config, name) = try daemonConfiguration()
        defer { unlink(config) }
        // What example-daemon.socket does: both names bound and listening before the daemon
        // runs. One FileDescriptorName= names every socket of a unit: both are "example-daemon".
        let service = try listeningSocket(bound: name)
        defer { close(service) }
        let actor = try listeningSocket(bound: name + ".actor")
        defer { close(actor) }
        let daemon = try DaemonProcess(environment: [:], arguments: [config],
                                       listeningSockets: [(actor, "example-daemon"), (service, "example-daemon")])
        try await daemon.waitForLine(startingWith: "ready")
        let (portExit, portOutput) = try await ExampleClientProcess(["--name", name, "--count", "2"]).finish()
        #expect(portExit == .exited(0), "\(portOutput)")
        let (actorExit, actorOutput) = try await ExampleClientProcess(["--name", name, "--count", "2", "--distributed"]).finish()
        #expect(actorExit == .exited(0), "\(actorOutput)")
        #expect(actorOutput.contains("done: 2 correct results from \(name).actor"), "\(actorOutput)")
        daemon.send(SIGTERM)
        #expect(await daemon.waitForExit() == .exited(0))
    }
}

/// The numbers of a "stopped: A answered, R refused, D dropped, U unanswered" line.
struct Summary {
    var answered = 0, refused = 0, dropped = 0, unanswered = 0

    init?(_ line: String) {
        let words = line.dropFirst("stopped: ".count).split(separator: ",").map { $0.split(separator: " ") }
        guard words.count == 4, words.allSatisfy({ $0.count == 2 && Int($0[0]) != nil }) else { return nil }
        let numbers = Dictionary(uniqueKeysWithValues: words.map { (String($0[1]), Int($0[0])!) })
        guard let answered = numbers["answered"], let refused = numbers["refused"], let dropped = numbers["dropped"],
              let unanswered = numbers["unanswered"] else { return nil }
        (self.answered, self.refused, self.dropped, self.unanswered) = (answered, refused, dropped, unanswered)
    }
}

/// This process as a client that sends requests through one reply port and reads nothing: the
/// port is on no loop, so its connection is never read and fills.
final class HostileClient: Sendable {
    let service: MessagePort
    let reply: MessagePort

    private init(service: MessagePort, reply: MessagePort) {
        (self.service, self.reply) = (service, reply)
    }

    /// Connects to `name` and sends `requests` requests (Wire.request [key, rounds]) on a thread
    /// of its own.
    static func flood(_ name: String, requests: Int, rounds: UInt64) async throws -> HostileClient {
        try await onNewThread("hostile-client") {
            Result {
                let client = HostileClient(service: try MessagePort.connect(to: name), reply: try MessagePort(queueLimit: 4096))
                for key in 1...UInt64(requests) {
                    // A hang guard: a daemon under a sanitizer on a loaded machine reads slowly.
                    try client.service.send(msgid: 1, components: [words(key, rounds)], from: client.reply, timeout: .seconds(60))
                }
                return client
            }
        }.get()
    }

    /// Starts reading the reply port (on a resident thread) and waits until `expected`
    /// refusals (Wire.refused) arrived or `patience` passed; returns how many there were, their
    /// distinct reasons, and how many said "busy" (2).
    func readReplies(expecting expected: Int) async throws -> (refusals: Int, reasons: Set<UInt64>, busy: Int) {
        let reasons = Locked<[UInt64]>([])
        let thread = ResidentThread(name: "hostile-reader")
        defer { thread.stop() }
        reply.setHandler { message in
            guard message.msgid == 4, let data = message.data(at: 0), data.count == 16 else { return }
            let reason = data.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(fromByteOffset: 8, as: UInt64.self)) }
            reasons.withLock { $0.append(reason) }
        }
        thread.runLoop.add(reply, forMode: .default)
        await onNewThread("hostile-wait") {
            let deadline = ContinuousClock.now + patience
            while reasons.withLock({ $0.count }) < expected && ContinuousClock.now < deadline { usleep(10_000) }
        }
        let all = reasons.withLock { $0 }
        return (all.count, Set(all.filter { $0 != 2 }), all.count { $0 == 2 })
    }
}

/// Little-endian 64-bit words, as example-daemon's Wire encodes them.
func words(_ values: UInt64...) -> MessagePort.Message.Component {
    .data(values.map(\.littleEndian).withUnsafeBytes { Data($0) })
}

/// A listening AF_UNIX SOCK_SEQPACKET socket bound to `name` in this user's scope, as systemd
/// binds it for a `.socket` unit's `ListenSequentialPacket=@runloopkit/<uid>/<name>`.
func listeningSocket(bound name: String) throws -> Int32 {
    let listening = socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard listening >= 0 else { throw TestFailure("socket: errno \(errno)") }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array("runloopkit/\(geteuid())/\(name)".utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.baseAddress!.advanced(by: 1).copyMemory(from: bytes, byteCount: bytes.count) }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + bytes.count)
    let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listening, $0, length) } }
    guard bound == 0 && listen(listening, 16) == 0 else {
        close(listening)
        throw TestFailure("bind/listen \(name): errno \(errno)")
    }
    return listening
}

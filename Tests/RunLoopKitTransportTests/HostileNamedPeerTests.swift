// Guarantees §3.30 (Protocols/named-ports.md §6): nothing a peer process sends — a malformed
// handshake, silence, a forged pid, a flood of connections — crashes the owner, blocks its
// loop or leaks a descriptor; each costs the peer its connection and is reported.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// Connections the owner of `receiver`'s name accepted and holds until their HELLO.
func pendingHandshakes(_ receiver: ReceivingPort) -> Int {
    receiver.port.lock.withLock { receiver.port.state.publication?.pendingCount ?? 0 }
}

/// A raw connection to `name` in this process's scope, as a hostile client makes it.
func rawConnection(to name: String) throws -> SeqPacketSocket {
    try SeqPacketSocket.connect(toAbstractName: PortName(name).address(uid: geteuid()), deadline: .now + .seconds(5))
}

/// Whether the owner dropped `socket` (end-of-stream or a reset) within the hang guard; any
/// answer record before that is skipped.
func ownerDropped(_ socket: SeqPacketSocket, timeout: Duration = waitLimit) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while socket.waitUntilReadable(deadline: deadline) {
        guard let record = try? socket.receiveSmallRecord(capacity: 256) else { return true }
        if record.bytes.isEmpty { return true }
    }
    return false
}

@Suite("§3.30 hostile named-port peers")
struct HostileNamedPeerTests {
    static let malformed: [(String, [UInt8], HandshakeError)] = [
        ("short", [0x52, 0x4C, 0x4B], .truncated),
        ("frame instead of HELLO", frame(msgid: 1), .badMagic),
        ("version 9", [0x52, 0x4C, 0x4B, 0x4E, 9, 1, 1, 0, 0x61], .unsupportedVersion),
        ("WELCOME to the owner", Handshake.welcome.encode(), .unexpectedKind),
        ("reserved byte", [0x52, 0x4C, 0x4B, 0x4E, 1, 1, 1, 7, 0x61], .reservedBytes),
        ("length lies", [0x52, 0x4C, 0x4B, 0x4E, 1, 1, 9, 0, 0x61], .lengthMismatch),
        ("path as name", Handshake.hello(name: Array("/etc/passwd".utf8)).encode(), .invalidName),
        ("another name", Handshake.hello(name: Array("someone-else".utf8)).encode(), .wrongName),
    ]

    @Test("§3.30 a malformed handshake: dropped, reported with its reason, the port keeps serving, no descriptor leaks",
          arguments: 0..<malformed.count)
    func malformedHandshake(_ index: Int) throws {
        let (label, bytes, reason) = Self.malformed[index]
        let name = uniqueName("malformed")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let hostile = try rawConnection(to: name)
        try hostile.send(bytes)
        #expect(ownerDropped(hostile), "\(label)")
        hostile.close()
        #expect(receiver.waitForError() == .handshakeFailed(reason), "\(label): \(receiver.errors.value)")
        // The owner closed its end and holds no pending connection: per connection rather than
        // from /proc, so that tests running beside this one cannot blur the count.
        #expect(pendingHandshakes(receiver) == 0, "\(label)")
        let good = try MessagePort.connect(to: name)
        try good.send(msgid: 1, timeout: waitLimit)
        #expect(receiver.waitForMessages(1) != nil)
        #expect(receiver.messages.value.count == 1, "nothing of the hostile peer was delivered")
    }

    @Test("§3.30 descriptors or a frame with the HELLO: dropped as unexpectedControlMessage, the descriptor closed")
    func helloWithDescriptor() throws {
        let name = uniqueName("hello-fd")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let hostile = try rawConnection(to: name)
        let (a, b) = rawSeqPacketPair()
        defer { close(a) }
        try hostile.send(Handshake.hello(name: Array(name.utf8)).encode(), descriptors: [b])
        close(b)
        #expect(ownerDropped(hostile))
        hostile.close()
        #expect(receiver.waitForError() == .handshakeFailed(.unexpectedControlMessage))
        #expect(waitForHangUp(a), "the owner closed the descriptor that came with the HELLO")
    }

    @Test("§3.30 silence: a peer that connects and sends nothing is dropped at the HELLO deadline and reported; the loop keeps serving meanwhile")
    func silentPeer() throws {
        let name = uniqueName("silent")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let silent = try rawConnection(to: name)
        defer { silent.close() }
        // Meanwhile the loop serves others.
        let good = try MessagePort.connect(to: name)
        try good.send(msgid: 1, timeout: waitLimit)
        #expect(receiver.waitForMessages(1) != nil)
        #expect(ownerDropped(silent, timeout: NameListener.helloTimeout + waitLimit))
        #expect(receiver.waitForError() == .handshakeFailed(.timedOut))
    }

    @Test("§3.30 a flood of silent connections: at most 64 pending, the oldest crowded out and reported, descriptors bounded and all returned")
    func flood() throws {
        let name = uniqueName("flood")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let pending = { pendingHandshakes(receiver) }
        // Every report, not a rate-limited few (the limit has a test of its own).
        receiver.port.lock.withLock { receiver.port.state.publication }?.reports.configure(burst: .max, interval: .seconds(3600))
        var hostile: [SeqPacketSocket] = []
        var most = 0
        for _ in 0..<200 {
            hostile.append(try rawConnection(to: name))
            most = max(most, pending())
        }
        #expect(waitUntil { receiver.errors.value.count >= 200 - NameListener.maximumPending })
        #expect(receiver.errors.value.allSatisfy { $0 == .handshakeFailed(.crowdedOut) || $0 == .handshakeFailed(.timedOut) },
                "\(Set(receiver.errors.value.map(\.description)))")
        // The owner holds a descriptor for each pending connection, and never more than the bound.
        #expect(most <= NameListener.maximumPending, "the owner held \(most) pending connections")
        // A legitimate client still gets through (crowding out one more of the flood).
        do {
            let good = try MessagePort.connect(to: name)
            try good.send(msgid: 1, timeout: waitLimit)
            #expect(receiver.waitForMessages(1) != nil)
        }
        // Every accepted descriptor is returned: the owner closes its end of each (crowded out at
        // once, the rest at their HELLO deadline). Counted per connection, not from /proc, so that
        // tests running beside this one cannot blur the count.
        let dropped = hostile.filter { ownerDropped($0, timeout: NameListener.helloTimeout + waitLimit) }.count
        #expect(dropped == hostile.count)
        #expect(pending() == 0)
        for socket in hostile { socket.close() }
    }

    @Test("§3.30 a forged pid in SCM_CREDENTIALS from an unprivileged peer: the kernel refuses it (EPERM); the owner delivers nothing and drops the silent peer",
          .enabled(if: geteuid() == 0, "needs root to run the C peer as nobody"))
    func forgedPid() throws {
        let name = uniqueName("forged")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        defer { receiver.stop() }
        let liar = try ChildProcess(portPeer, ["as", "\(nobody)", "\(nogroup)", "exec", portPeerC, "lie", name])
        #expect(liar.finish(timeout: NameListener.helloTimeout + waitLimit) == .exited(0), "\(liar.output)")
        #expect(liar.output.contains("lie refused: EPERM"), "\(liar.output)")
        #expect(liar.output.contains("answer: closed"), "\(liar.output)")
        #expect(receiver.waitForError() == .handshakeFailed(.timedOut))
        #expect(receiver.messages.value.isEmpty)
    }

    @Test("§3.30/§3.26 a frame without credentials on a named connection costs the connection (accessDenied)")
    func frameWithoutCredentials() throws {
        let name = uniqueName("no-creds")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        let proxy = try MessagePort.connect(to: name)
        // White-box: switch SO_PASSCRED off on the owner's end, so the next record has none.
        func ends() -> [Int32] {
            receiver.port.lock.withLock { receiver.port.state.connections?.sockets.values.map(\.socket.descriptor.rawValue) ?? [] }
        }
        // The owner adds the connection right after sending WELCOME, on its loop.
        try #require(waitUntil { ends().count == 1 })
        var off: Int32 = 0
        try #require(setsockopt(ends()[0], SOL_SOCKET, SO_PASSCRED, &off, socklen_t(MemoryLayout<Int32>.size)) == 0)
        try? proxy.send(msgid: 1, timeout: waitLimit)
        #expect(receiver.waitForError() == .accessDenied)
        #expect(receiver.messages.value.isEmpty)
    }
}

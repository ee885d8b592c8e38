// Test 9 and the kernel-level rejections of Protocols/port-message-frame.md §5.1/§5.3:
// a malformed frame drops its connection only, is reported with its reason, and every
// descriptor that came with it is closed.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// The identity of an open file (device and inode): what a leaked copy of a descriptor shares
/// with the original, whatever its number.
struct FileIdentity: Hashable {
    var device: UInt64
    var inode: UInt64

    init?(_ descriptor: Int32) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// The identities of every descriptor open in this process, and how many descriptors
    /// refer to each.
    static func openInProcess() -> [FileIdentity: Int] {
        var result: [FileIdentity: Int] = [:]
        guard let directory = opendir("/proc/self/fd") else { return result }
        defer { closedir(directory) }
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let number = Int32(name), let identity = FileIdentity(number) else { continue }
            result[identity, default: 0] += 1
        }
        return result
    }
}

/// Descriptors a test attaches to frames, whose copies must all be closed by the receiver.
/// Only kinds with an inode of their own (pipes, sockets), so that a leaked copy is recognised
/// even while other tests open and close descriptors in parallel.
final class Attachments {
    private(set) var descriptors: [Int32] = []
    private var identities: Set<FileIdentity> = []

    func pipe() -> Int32 {
        let ends = closeOnExecPipe()
        keep(ends.write)
        return keep(ends.read)
    }

    func socket(_ type: Int32) -> Int32 {
        var ends: [Int32] = [-1, -1]
        precondition(socketpair(AF_UNIX, type | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0)
        keep(ends[1])
        return keep(ends[0])
    }

    @discardableResult
    func keep(_ descriptor: Int32) -> Int32 {
        descriptors.append(descriptor)
        if let identity = FileIdentity(descriptor) { identities.insert(identity) }
        return descriptor
    }

    /// Closes the test's own copies; then no descriptor of the process may refer to any of
    /// these files. Returns the leaked count (waiting up to `waitLimit` for it to reach 0).
    func closeAndCountLeaks() -> Int {
        for descriptor in descriptors { close(descriptor) }
        descriptors = []
        var leaked = 0
        waitUntil {
            let open = FileIdentity.openInProcess()
            leaked = identities.reduce(0) { $0 + (open[$1] ?? 0) }
            return leaked == 0
        }
        return leaked
    }
}

@Suite("Malformed frames", .timeLimit(.minutes(2)))
struct MalformedFrameTests {
    // MARK: 9

    @Test("a bad-magic frame drops only its connection; a second connection keeps delivering")
    func badMagicDropsOneConnection() throws {
        let receiver = try ReceivingPort(name: "malformed-bad-magic")
        defer { receiver.stop() }
        let bad = try receiver.port.makeSendRight()
        defer { close(bad) }
        let good = try MessagePort(sendRight: receiver.port.makeSendRight())
        #expect(receiver.port.connectionCount == 2)

        try good.send(msgid: 1, components: [.data(Data("before".utf8))], timeout: waitLimit)
        #expect(receiver.waitForMessages(1) != nil)

        var bytes = frame(msgid: 2, [.data(Array("evil".utf8))])
        bytes[0] = 0x58  // "XLKM"
        try sendRaw(bytes, on: bad)

        #expect(receiver.waitForError() == .malformedFrame(.badMagic), "\(receiver.errors.value)")
        #expect(receiver.errors.value.count == 1)
        #expect(waitForHangUp(bad), "the connection of the bad frame was not closed")
        #expect(waitUntil { receiver.port.connectionCount == 1 }, "connectionCount \(receiver.port.connectionCount)")
        #expect(throws: Errno(rawValue: EPIPE)) { try sendRaw(frame(msgid: 3), on: bad) }

        try good.send(msgid: 4, components: [.data(Data("after".utf8))], timeout: waitLimit)
        #expect(waitUntil { receiver.msgids == [1, 4] }, "delivered \(receiver.msgids)")
        #expect(receiver.messages.value.last?.text == "after")
        #expect(receiver.port.isValid)
        #expect(receiver.errors.value == [.malformedFrame(.badMagic)])
    }

    @Test("frames before a malformed one stay delivered; records after it on the same connection are discarded")
    func recordsAfterMalformedFrameAreDiscarded() throws {
        let receiver = try ReceivingPort(name: "malformed-sequence")
        defer { receiver.stop() }
        let attachments = Attachments()
        // Send everything while the port has no reader, so all records are queued together.
        receiver.port.setHandler(nil)
        let right = try receiver.port.makeSendRight()
        try sendRaw(frame(msgid: 1), on: right)
        try sendRaw(frame(msgid: 2, [.data([9])]), on: right)
        try sendRaw(frame(msgid: 3, reply: false).with(byte: 4, set: 7), on: right)  // unsupportedVersion
        let queuedRight = attachments.socket(Int32(SOCK_SEQPACKET.rawValue))
        try sendRaw(frame(msgid: 4, [.port]), descriptors: [queuedRight], on: right)
        close(right)
        let messages = receiver.messages
        receiver.port.setHandler { message in messages.update { $0.append(message) } }

        #expect(receiver.waitForError() == .malformedFrame(.unsupportedVersion))
        #expect(waitUntil { receiver.port.connectionCount == 0 })
        #expect(receiver.msgids == [1, 2], "only the frames before the malformed one are delivered")
        #expect(attachments.closeAndCountLeaks() == 0, "a descriptor queued behind the malformed frame leaked")
    }

    // MARK: Kernel-level reasons

    @Test("a record longer than the frame limit: .truncated (and .frameTooLarge for exactly 65537 bytes)")
    func oversizedRecords() throws {
        let receiver = try ReceivingPort(name: "malformed-oversized")
        defer { receiver.stop() }
        let attachments = Attachments()

        let first = try receiver.port.makeSendRight()
        defer { close(first) }
        var huge = frame(msgid: 1, [.data([UInt8](repeating: 1, count: 65_000))])
        huge += [UInt8](repeating: 0, count: 100_000 - huge.count)
        try sendRaw(huge, descriptors: [attachments.pipe()], on: first)
        #expect(receiver.waitForError() == .malformedFrame(.truncated), "\(receiver.errors.value)")
        #expect(waitForHangUp(first))

        // 65537 bytes, consistent lengths: the receive buffer holds it (spec §5: a buffer of
        // 65537 bytes), so decode rejects it.
        let second = try receiver.port.makeSendRight()
        defer { close(second) }
        let overByOne = PortFrameBytes.consistent(dataLength: 65513)
        #expect(overByOne.count == 65537)
        try sendRaw(overByOne, on: second)
        #expect(waitUntil { receiver.errors.value.count == 2 })
        #expect(receiver.errors.value.last == .malformedFrame(.frameTooLarge), "\(receiver.errors.value)")
        #expect(receiver.messages.value.isEmpty)
        #expect(attachments.closeAndCountLeaks() == 0)
    }

    @Test("more descriptors than the receiver has room for: .descriptorsTruncated, none leaks")
    func tooManyDescriptors() throws {
        let receiver = try ReceivingPort(name: "malformed-ctrunc")
        defer { receiver.stop() }
        let attachments = Attachments()
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        // 100 copies of sockets and pipes (the kernel allows 253 per message; a receiver has
        // room for 65 plus alignment slack).
        let kinds = [attachments.pipe(), attachments.socket(Int32(SOCK_SEQPACKET.rawValue)),
                     attachments.socket(Int32(SOCK_STREAM.rawValue))]
        let descriptors = (0..<100).map { kinds[$0 % kinds.count] }
        try sendRaw(frame(msgid: 1, [PortFrame.Component](repeating: .port, count: 64), reply: true),
                    descriptors: descriptors, on: right)
        #expect(receiver.waitForError() == .malformedFrame(.descriptorsTruncated), "\(receiver.errors.value)")
        #expect(waitForHangUp(right))
        #expect(receiver.messages.value.isEmpty)
        #expect(attachments.closeAndCountLeaks() == 0, "descriptors installed before MSG_CTRUNC were not closed")
    }

    @Test("a port component that is not an AF_UNIX SOCK_SEQPACKET socket: .descriptorNotAPort, none leaks",
          arguments: ["pipe", "stream socket", "datagram socket", "seqpacket then pipe", "reply port is a pipe"])
    func descriptorNotAPort(_ kind: String) throws {
        let receiver = try ReceivingPort(name: "malformed-not-a-port")
        defer { receiver.stop() }
        let attachments = Attachments()
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let bytes: [UInt8]
        let descriptors: [Int32]
        switch kind {
        case "pipe":
            (bytes, descriptors) = (frame(msgid: 1, [.port]), [attachments.pipe()])
        case "stream socket":
            (bytes, descriptors) = (frame(msgid: 1, [.port]), [attachments.socket(Int32(SOCK_STREAM.rawValue))])
        case "datagram socket":
            (bytes, descriptors) = (frame(msgid: 1, [.port]), [attachments.socket(Int32(SOCK_DGRAM.rawValue))])
        case "seqpacket then pipe":
            // The first descriptor is a genuine send right: it must be closed too.
            (bytes, descriptors) = (frame(msgid: 1, [.port, .data([1]), .port]),
                                    [attachments.socket(Int32(SOCK_SEQPACKET.rawValue)), attachments.pipe()])
        default:
            (bytes, descriptors) = (frame(msgid: 1, [.port], reply: true),
                                    [attachments.socket(Int32(SOCK_SEQPACKET.rawValue)), attachments.pipe()])
        }
        try sendRaw(bytes, descriptors: descriptors, on: right)
        #expect(receiver.waitForError() == .malformedFrame(.descriptorNotAPort), "\(receiver.errors.value)")
        #expect(waitForHangUp(right))
        #expect(receiver.messages.value.isEmpty)
        #expect(attachments.closeAndCountLeaks() == 0)
    }

    @Test("ancillary data other than SCM_RIGHTS and the kernel's SCM_CREDENTIALS and SCM_PIDFD (SCM_TIMESTAMP): .unexpectedControlMessage, none leaks")
    func unexpectedControlMessage() throws {
        let receiver = try ReceivingPort(name: "malformed-credentials")
        defer { receiver.stop() }
        let attachments = Attachments()
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        // A sender can attach only SCM_RIGHTS and SCM_CREDENTIALS; anything else is asked for by
        // the receive end's own options. Set SO_TIMESTAMP on the port's one connection
        // (white-box, via @testable): each record then also brings an SCM_TIMESTAMP.
        let receiveEnds = receiver.port.lock.withLock { receiver.port.state.connections?.sockets.values.map(\.socket.descriptor.rawValue) ?? [] }
        try #require(receiveEnds.count == 1)
        var on: Int32 = 1
        try #require(setsockopt(receiveEnds[0], SOL_SOCKET, SO_TIMESTAMP, &on, socklen_t(MemoryLayout<Int32>.size)) == 0)

        try sendRaw(frame(msgid: 1, [.port]), descriptors: [attachments.socket(Int32(SOCK_SEQPACKET.rawValue))], on: right)
        #expect(receiver.waitForError() == .malformedFrame(.unexpectedControlMessage), "\(receiver.errors.value)")
        #expect(waitForHangUp(right))
        #expect(receiver.messages.value.isEmpty)
        #expect(attachments.closeAndCountLeaks() == 0)
    }

    @Test("the SCM_PIDFD of a receive end with SO_PASSPIDFD (a send right's first frames) is taken, not refused; its pidfd is closed with the message")
    func pidfdTaken() throws {
        let receiver = try ReceivingPort(name: "pidfd-taken")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        // From a child: its pidfd's target names it alone (pidfs gives each process an inode),
        // so another descriptor with that number later cannot pass for this one.
        let child = try ChildProcess(portPeer, ["send-count", "3", "1"], inherit: [(right, 3)])
        #expect(child.finish() == .exited(0))
        let (descriptor, identity): (Int32, String) = try {
            let message = try #require(receiver.waitForMessages(1)?.first)
            let descriptor = try #require(message.sender?.process?.descriptor)
            return (descriptor, try #require(fdTarget(descriptor)))
        }()
        #expect(identity.hasPrefix("pidfd:") || identity.contains("[pidfd]"), "\(identity)")
        #expect(receiver.errors.value.isEmpty)
        receiver.clear()
        // The port's connection keeps the process it is pinned to while it is open.
        close(right)
        #expect(waitUntil { receiver.port.connectionCount == 0 })
        #expect(waitUntil { fdTarget(descriptor) != identity }, "the pidfd was closed once nothing held it")
    }

    @Test("decode-level rejections over a real connection: dropped, reported, descriptors closed",
          arguments: allVectors.filter { if case .error = $0.expectation { true } else { false } })
    func vectorOverTheWire(_ vector: FrameVector) throws {
        guard case .error(let reason) = vector.expectation else { return }
        let receiver = try ReceivingPort(name: "malformed-vector")
        defer { receiver.stop() }
        let attachments = Attachments()
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let descriptors = (0..<vector.descriptors).map { _ in attachments.socket(Int32(SOCK_SEQPACKET.rawValue)) }
        if vector.bytes.isEmpty && descriptors.isEmpty {
            // A zero-length record is end-of-stream on SOCK_SEQPACKET: dropped silently.
            try sendRaw([], on: right)
            #expect(waitForHangUp(right))
            #expect(receiver.errors.value.isEmpty)
        } else {
            try sendRaw(vector.bytes, descriptors: descriptors, on: right)
            #expect(receiver.waitForError() == .malformedFrame(reason), "\(receiver.errors.value)")
            #expect(waitForHangUp(right))
        }
        #expect(receiver.messages.value.isEmpty)
        #expect(attachments.closeAndCountLeaks() == 0)
    }
}

extension [UInt8] {
    mutating func appendLittleEndian<T: FixedWidthInteger>(_ value: T) {
        Swift.withUnsafeBytes(of: value.littleEndian) { append(contentsOf: $0) }
    }
}

enum PortFrameBytes {
    /// A frame of one DATA component of `dataLength` bytes with consistent header fields,
    /// whatever its size (the encoder refuses oversized ones, so it is built by hand).
    static func consistent(dataLength: Int) -> [UInt8] {
        var bytes: [UInt8] = [0x52, 0x4C, 0x4B, 0x4D, 1, 0, 1, 0, 0, 0, 0, 0]
        bytes.appendLittleEndian(UInt32(dataLength))
        bytes += [1, 0, 0, 0]
        bytes.appendLittleEndian(UInt32(dataLength))
        bytes += [UInt8](repeating: 0x33, count: dataLength)
        return bytes
    }
}

extension [UInt8] {
    func with(byte index: Int, set value: UInt8) -> [UInt8] {
        var copy = self
        copy[index] = value
        return copy
    }
}

// §3.39–3.42: Data of any size across processes, as sealed memory (Protocols/port-message-frame.md
// §3.5, §5.3–5.4): passed, not copied; checked by the receiver; immutable once delivered.

import Glibc
import FoundationEssentials
import Testing
import CRunLoopKit
@testable import RunLoopKit

/// `count` bytes that differ from those of any other `seed`, so a reordering or a mix-up shows.
func patterned(_ count: Int, seed: UInt8) -> Data {
    var data = Data(count: count)
    data.withUnsafeMutableBytes { (bytes: UnsafeMutableRawBufferPointer) in
        for index in 0..<count { bytes[index] = UInt8(truncatingIfNeeded: index &* 131 &+ index >> 12) ^ seed }
    }
    return data
}

/// The mapping of /proc/self/maps that holds `data`'s first byte, as "PERMS:INODE:PATH", or nil
/// (the same form as PortPeer's sealed-echo reports).
func mapping(of data: Data) -> String? {
    let address: UInt = data.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    guard address != 0, let file = fopen("/proc/self/maps", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fields = text.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count >= 5 else { continue }
        let range = fields[0].split(separator: "-")
        guard range.count == 2, let low = UInt(range[0], radix: 16), let high = UInt(range[1], radix: 16),
              low <= address, address < high else { continue }
        let path = fields.count > 5 ? fields[5].trimmingPrefix { $0 == " " } : ""
        return "\(fields[1]):\(fields[4]):\(path)"
    }
    return nil
}

/// Whether any mapping of this process is of the file with inode `inode`.
func mapsInode(_ inode: UInt64) -> Bool {
    guard let file = fopen("/proc/self/maps", "r") else { return false }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        if fields.count >= 5, fields[4] == "\(inode)" { return true }
    }
    return false
}

/// The address of `signal`'s handler (0 for SIG_DFL).
func signalHandler(_ signal: Int32) -> UInt {
    var action = sigaction()
    sigaction(signal, nil, &action)
    return unsafeBitCast(action.__sigaction_handler.sa_handler, to: UInt.self)
}

/// A memfd of `size` bytes of `byte`, with `seals` added (none: unsealed).
func hostileMemfd(size: Int, byte: UInt8 = 0x5A, seals: Int32) -> Int32 {
    let fd = crlk_memfd_create_sealable("hostile")
    precondition(fd >= 0 && ftruncate(fd, off_t(size)) == 0, "memfd: \(String(cString: strerror(errno)))")
    let chunk = [UInt8](repeating: byte, count: min(size, 65536))
    var written = 0
    while written < size {
        let n = pwrite(fd, chunk, min(chunk.count, size - written), off_t(written))
        precondition(n > 0)
        written += n
    }
    if seals != 0 { precondition(crlk_memfd_add_seals(fd, seals) == 0, "seals: \(String(cString: strerror(errno)))") }
    return fd
}

let immutable = Int32(CRLK_SEAL_WRITE) | Int32(CRLK_SEAL_SHRINK) | Int32(CRLK_SEAL_GROW)

/// The sealed-echo child: its port, and the receiving port of this process it echoes to.
final class EchoPeer {
    let receiver: ReceivingPort
    let child: ChildProcess
    let port: MessagePort

    init(_ name: String) throws {
        receiver = try ReceivingPort(name: name)
        receiver.port.maximumIncomingDataSize = 1 << 31
        let sendRight = try receiver.port.makeSendRight()
        child = try ChildProcess(portPeer, ["sealed-echo", "3"], inherit: [(sendRight, 3)])
        close(sendRight)
        let hello = try #require(receiver.waitForMessages(1), "no port from PortPeer sealed-echo\n\(child.output)")
        port = try #require(hello[0].replyPort)
        receiver.clear()
    }

    /// The echoes of `count` messages: each the message as sent, plus the peer's report.
    func echoes(_ count: Int) -> [MessagePort.Message]? { receiver.waitForMessages(count) }

    func finish() -> ChildExit? {
        try? port.send(msgid: 0, components: [], timeout: waitLimit)
        let exit = child.finish()
        receiver.stop()
        return exit
    }
}

@Suite("Sealed memory across processes", .timeLimit(.minutes(3)))
struct SealedMemoryTests {
    // MARK: §3.39

    @Test("§3.39 Data of 1 MiB and 16 MiB crosses processes byte for byte, in order with small messages, as sealed memory nothing copied")
    func largeDataAcrossProcesses() throws {
        #expect(MessagePort.inlineDataLimit == 65_512)
        let peer = try EchoPeer("sealed-large")
        let small = Data("small".utf8)
        let oneMiB = patterned(1 << 20, seed: 1)
        // 2 MiB under a sanitizer, which instruments every byte the test writes and compares.
        let sixteenMiB = patterned(underSanitizer ? 2 << 20 : 16 << 20, seed: 2)
        // Inline beside other components (a Data of the whole limit fits a frame only alone:
        // Backpressure's frame-size test sends one).
        let inline = patterned(40_000, seed: 3)
        let aboveLimit = patterned(MessagePort.inlineDataLimit + 1, seed: 4)
        let replyPort = try MessagePort()
        defer { replyPort.invalidate() }
        let sent: [(msgid: UInt32, components: [MessagePort.Message.Component])] = [
            (10, [.data(small)]),
            (11, [.data(oneMiB)]),
            (12, [.data(small)]),
            (13, [.data(sixteenMiB)]),
            (14, [.data(small), .data(inline), .data(aboveLimit), .port(replyPort), .data(oneMiB)]),
            (15, [.data(Data())]),
        ]
        for message in sent {
            try peer.port.send(msgid: message.msgid, components: message.components,
                               from: message.msgid == 14 ? replyPort : nil, timeout: waitLimit)
        }
        let echoes = try #require(peer.echoes(sent.count), "echoed \(peer.receiver.msgids)\n\(peer.child.output)")
        let exit = peer.finish()
        #expect(exit == .exited(0), "\(peer.child.output)")
        #expect(echoes.map(\.msgid) == sent.map(\.msgid), "in order with the small messages")
        #expect(peer.receiver.errors.value.isEmpty, "\(peer.receiver.errors.value)")
        for (message, echo) in zip(sent, echoes) {
            let components = echo.components
            try #require(components.count == message.components.count + 1, "msgid \(message.msgid)")
            guard case .data(let reportBytes) = components.last! else { Issue.record("no report"); continue }
            let reports = String(decoding: reportBytes, as: UTF8.self).split(separator: ";").map(String.init)
            var reportIndex = 0
            for (original, arrived) in zip(message.components, components) {
                switch (original, arrived) {
                case (.data(let original), .data(let arrived)):
                    #expect(arrived == original, "msgid \(message.msgid): bytes differ")
                    let large = original.count > MessagePort.inlineDataLimit
                    // In the peer: in sealed memory exactly when above the limit, mapped read-only
                    // and private from a memfd (its bytes were not copied into the peer's heap).
                    let report = reportIndex < reports.count ? reports[reportIndex] : ""
                    reportIndex += 1
                    #expect(report.hasPrefix("\(original.count) sealed=\(large)"), "msgid \(message.msgid): \(report)")
                    if large {
                        #expect(report.contains("map=r--p:") && report.contains("/memfd:runloopkit-data"), "\(report)")
                        // Back here too: the peer sent it on as the memory it received.
                        #expect(SealedMemory.contains(arrived))
                        let map = mapping(of: arrived) ?? "none"
                        #expect(map.hasPrefix("r--p:") && map.contains("/memfd:runloopkit-data"), "\(map)")
                    } else {
                        #expect(!SealedMemory.contains(arrived))
                    }
                case (.port, .port(let proxy)):
                    #expect(proxy.isProxy)
                default:
                    Issue.record("msgid \(message.msgid): component kinds differ")
                }
            }
        }
        #expect(echoes[4].replyPort == nil, "the peer echoes without a reply port")
    }

    @Test("§3.39 the C peer (written from the spec) sends sealed memory and gets it back as sealed memory")
    func cPeerSendsAndReceivesMemory() throws {
        let size = 3 << 20 + 5
        let receiver = try ReceivingPort(name: "sealed-c") { message in
            guard let replyPort = message.replyPort, message.components.count == 2,
                  case .data(let data) = message.components[1] else { return }
            try? replyPort.send(msgid: message.msgid + 1, components: [.data(data)], timeout: .seconds(10))
        }
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeerC, ["sealed", "3", "\(size)"], inherit: [(sendRight, 3)])
        close(sendRight)
        let exit = child.finish()
        #expect(exit == .exited(0), "\(child.output)")
        #expect(child.output.contains("memory intact"), "\(child.output)")
        let messages = try #require(receiver.waitForMessages(1), "\(receiver.errors.value)")
        #expect(messages[0].msgid == 3900)
        guard messages[0].components.count == 2, case .data(let text) = messages[0].components[0],
              case .data(let data) = messages[0].components[1] else {
            Issue.record("components: \(messages[0].components)")
            return
        }
        #expect(String(decoding: text, as: UTF8.self) == "sealed from C")
        #expect(data.count == size)
        #expect(data.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) in (0..<size).allSatisfy { bytes[$0] == UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 / 4096) } })
        #expect(SealedMemory.contains(data))
        #expect(mapping(of: data).map { $0.hasPrefix("r--p:") && $0.contains("/memfd:portpeerc") } == true, "\(mapping(of: data) ?? "none")")
    }

    // MARK: §3.40

    @Test("§3.40 SealedMemory.data is sealed read-only memory; sent on, it is the same memfd in every process")
    func sealedMemoryIsPassedNotCopied() throws {
        let count = 4 << 20
        let made = try SealedMemory.data(count: count) { bytes in
            #expect(bytes.count == count)
            for index in stride(from: 0, to: count, by: 4096) { bytes[index] = UInt8(truncatingIfNeeded: index >> 12) }
        }
        #expect(made.count == count)
        #expect(made[4096 * 3] == 3)
        #expect(SealedMemory.contains(made))
        #expect(SealedMemory.contains(made[100..<200]), "a slice lies in the same memory")
        #expect(!SealedMemory.contains(Data(made)), "a copy does not")
        #expect(!SealedMemory.contains(Data()))
        let empty = try SealedMemory.data(count: 0) { bytes in #expect(bytes.isEmpty) }
        #expect(empty.isEmpty)

        // Nobody can change it: not the bytes, not the size, not through a new writable mapping.
        let region = try #require(made.withUnsafeBytes { SealedRegions.region(containing: $0.baseAddress!, count: count) })
        let fd = region.file.descriptor.rawValue
        #expect(ftruncate(fd, 0) == -1 && errno == EPERM)
        #expect(ftruncate(fd, off_t(count * 2)) == -1 && errno == EPERM)
        #expect(pwrite(fd, [1], 1, 0) == -1 && errno == EPERM)
        #expect(mmap(nil, count, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED && errno == EPERM)
        let seals = crlk_memfd_get_seals(fd)
        #expect(seals & immutable == immutable && seals & Int32(CRLK_SEAL_SEAL) != 0)
        let ownMap = try #require(mapping(of: made))
        #expect(ownMap.hasPrefix("r--p:"), "\(ownMap)")
        let inode = ownMap.split(separator: ":")[1]

        let peer = try EchoPeer("sealed-forward")
        try peer.port.send(msgid: 20, components: [.data(made)], timeout: waitLimit)
        // A slice from further in is copied into memory of its own.
        try peer.port.send(msgid: 21, components: [.data(made[1 << 20..<(2 << 20)])], timeout: waitLimit)
        let echoes = try #require(peer.echoes(2), "\(peer.child.output)")
        #expect(peer.finish() == .exited(0), "\(peer.child.output)")
        let report = String(decoding: try #require(echoes[0].components.last.flatMap { if case .data(let d) = $0 { d } else { nil } }), as: UTF8.self)
        #expect(report == "\(count) sealed=true map=r--p:\(inode):/memfd:runloopkit-data (deleted)",
                "the peer maps the very memfd this process made")
        guard case .data(let back) = echoes[0].components[0] else { Issue.record("no data"); return }
        #expect(back == made)
        #expect(mapping(of: back)?.split(separator: ":")[1] == inode, "sent on, it is still the same memfd")
        #expect(back.withUnsafeBytes { $0.baseAddress } != made.withUnsafeBytes { $0.baseAddress }, "a mapping of its own")
        guard case .data(let slice) = echoes[1].components[0] else { Issue.record("no data"); return }
        #expect(slice == made[1 << 20..<(2 << 20)])
        #expect(mapping(of: slice)?.split(separator: ":")[1] != inode)
    }

    @Test("§3.39 §3.40 256 MiB (64 MiB under a sanitizer) to another process and back: the same memfd both ways, mapped, never copied")
    func quarterGibibyteIsPassedNotCopied() throws {
        // Under a sanitizer the comparison's every byte is checked against shadow memory.
        let count = (underSanitizer ? 64 : 256) << 20
        let made = try SealedMemory.data(count: count) { bytes in
            // One byte per page, each page's own: a copy or a remapping that lost a page shows.
            for index in stride(from: 0, to: count, by: 4096) { bytes[index] = UInt8(truncatingIfNeeded: index >> 12 &+ 1) }
            bytes[count - 1] = 0xEE
        }
        let inode = try #require(mapping(of: made)?.split(separator: ":")[1])
        let peer = try EchoPeer("sealed-quarter-gib")
        try peer.port.send(msgid: 30, components: [.data(made)], timeout: waitLimit)
        let echoes = try #require(peer.echoes(1), "\(peer.child.output)")
        let report = String(decoding: try #require(echoes[0].components.last.flatMap { if case .data(let d) = $0 { d } else { nil } }),
                            as: UTF8.self)
        #expect(report == "\(count) sealed=true map=r--p:\(inode):/memfd:runloopkit-data (deleted)",
                "the peer maps the very memfd this process made")
        guard case .data(let back) = echoes[0].components[0] else { Issue.record("no data"); return }
        #expect(peer.finish() == .exited(0), "\(peer.child.output)")
        #expect(back.count == count)
        #expect(mapping(of: back)?.split(separator: ":")[1] == inode, "back here, still the same memfd")
        #expect(back == made)
    }

    // MARK: §3.41

    enum Hostile: String, CaseIterable, CustomStringConvertible {
        case unsealed, missingWrite, missingShrink, missingGrow, futureWriteOnly, pipe, regularFile, socket,
             smallerThanDeclared, pastLimit, memfdAsPort
        var description: String { rawValue }
    }

    @Test("§3.41 hostile memory costs its sender the connection, is reported, delivers nothing and leaks no descriptor",
          arguments: Hostile.allCases)
    func hostileMemory(_ hostile: Hostile) throws {
        let busHandler = signalHandler(SIGBUS)
        let receiver = try ReceivingPort(name: "sealed-hostile")
        defer { receiver.stop() }
        receiver.port.maximumIncomingDataSize = 1 << 20
        let attachments = Attachments()
        let declared = 100_000
        var components: [PortFrame.Component] = [.data(Array("before".utf8)), .memory(declared)]
        let descriptor: Int32
        let expected: PortError
        switch hostile {
        case .unsealed:
            descriptor = hostileMemfd(size: declared, seals: 0)
            expected = .malformedFrame(.memoryNotSealed)
        case .missingWrite:
            descriptor = hostileMemfd(size: declared, seals: Int32(CRLK_SEAL_SHRINK) | Int32(CRLK_SEAL_GROW))
            expected = .malformedFrame(.memoryNotSealed)
        case .missingShrink:
            descriptor = hostileMemfd(size: declared, seals: Int32(CRLK_SEAL_WRITE) | Int32(CRLK_SEAL_GROW))
            expected = .malformedFrame(.memoryNotSealed)
        case .missingGrow:
            descriptor = hostileMemfd(size: declared, seals: Int32(CRLK_SEAL_WRITE) | Int32(CRLK_SEAL_SHRINK))
            expected = .malformedFrame(.memoryNotSealed)
        case .futureWriteOnly:
            descriptor = hostileMemfd(size: declared, seals: Int32(CRLK_SEAL_FUTURE_WRITE) | Int32(CRLK_SEAL_SHRINK) | Int32(CRLK_SEAL_GROW))
            expected = .malformedFrame(.memoryNotSealed)
        case .pipe:
            descriptor = attachments.pipe()
            expected = .malformedFrame(.descriptorNotMemory)
        case .regularFile:
            var template = Array("/tmp/sealed-hostile-XXXXXX".utf8CString)
            descriptor = mkstemp(&template)
            unlink(template)
            #expect(ftruncate(descriptor, off_t(declared)) == 0)
            expected = .malformedFrame(.descriptorNotMemory)
        case .socket:
            descriptor = attachments.socket(Int32(SOCK_STREAM.rawValue))
            expected = .malformedFrame(.descriptorNotMemory)
        case .smallerThanDeclared:
            descriptor = hostileMemfd(size: declared - 1, seals: immutable)
            expected = .malformedFrame(.memoryTooSmall)
        case .pastLimit:
            components = [.data(Array("before".utf8)), .memory((1 << 20) - 5)]
            descriptor = hostileMemfd(size: 1 << 20, seals: immutable)
            expected = .messageTooLarge(limit: 1 << 20)
        case .memfdAsPort:
            components = [.port]
            descriptor = hostileMemfd(size: 4096, seals: immutable)
            expected = .malformedFrame(.descriptorNotAPort)
        }
        attachments.keep(descriptor)
        let identity = try #require(FileIdentity(descriptor))

        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        try sendRaw(frame(msgid: 7, [.data(Array("first".utf8))]), on: right)
        try sendRaw(frame(msgid: 8, components), descriptors: [descriptor], on: right)
        #expect(receiver.waitForError() == expected, "\(receiver.errors.value)")
        #expect(receiver.errors.value.count == 1)
        #expect(waitForHangUp(right), "the connection of the hostile frame was not closed")
        #expect(receiver.msgids == [7], "nothing of the hostile frame is delivered")
        #expect(attachments.closeAndCountLeaks() == 0, "a descriptor of the hostile frame leaked")
        #expect(!mapsInode(identity.inode), "a mapping of the hostile memory remains")
        #expect(signalHandler(SIGBUS) == busHandler, "the library installed a SIGBUS handler")
    }

    @Test("§3.41 seals are checked as a mask: extra seals are accepted; what the sender does afterwards changes nothing")
    func sealsAreAMaskAndDeliveredDataCannotChange() throws {
        let receiver = try ReceivingPort(name: "sealed-mask")
        defer { receiver.stop() }
        let size = 200_000
        // F_SEAL_SEAL and F_SEAL_FUTURE_WRITE besides the three (and F_SEAL_EXEC where the kernel
        // added it for MFD_NOEXEC_SEAL).
        let fd = hostileMemfd(size: size, byte: 0x11,
                              seals: immutable | Int32(CRLK_SEAL_SEAL) | Int32(CRLK_SEAL_FUTURE_WRITE))
        defer { close(fd) }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        // Declares less than the memfd holds: the receiver maps the first `size - 1000` bytes.
        try sendRaw(frame(msgid: 9, [.memory(size - 1000), .data([1, 2, 3])]), descriptors: [fd], on: right)
        let messages = try #require(receiver.waitForMessages(1), "\(receiver.errors.value)")
        guard case .data(let data) = messages[0].components[0] else { Issue.record("no data"); return }
        #expect(data.count == size - 1000)
        #expect(data.allSatisfy { $0 == 0x11 })
        #expect(SealedMemory.contains(data))
        #expect(messages[0].components.count == 2)

        // The sender tries everything: nothing works, nothing faults.
        #expect(ftruncate(fd, 0) == -1)
        #expect(pwrite(fd, [0xFF], 1, 0) == -1)
        #expect(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED)
        #expect(data.allSatisfy { $0 == 0x11 })
        #expect(receiver.errors.value.isEmpty)
    }

    @Test("§3.41 maximumIncomingDataSize is 1 GiB by default and counts inline Data too")
    func incomingLimitCountsAllData() throws {
        let receiver = try ReceivingPort(name: "sealed-limit")
        defer { receiver.stop() }
        #expect(receiver.port.maximumIncomingDataSize == 1 << 30)
        receiver.port.maximumIncomingDataSize = 10
        let proxy = try MessagePort(sendRight: receiver.port.makeSendRight())
        try proxy.send(msgid: 1, components: [.data(Data(count: 6)), .data(Data(count: 4))], timeout: waitLimit)
        try proxy.send(msgid: 2, components: [.data(Data(count: 6)), .data(Data(count: 5))], timeout: waitLimit)
        #expect(receiver.waitForError() == .messageTooLarge(limit: 10))
        #expect(receiver.msgids == [1])
        #expect(waitUntil { !proxy.isValid || receiver.port.connectionCount == 0 })
    }

    // MARK: §3.42

    @Test("§3.42 a Data of any size sent to a port in this process is delivered as the same storage")
    func localSendIsNotCopied() throws {
        let receiver = try ReceivingPort(name: "sealed-local")
        defer { receiver.stop() }
        let plain = patterned(8 << 20, seed: 9)
        let sealed = try SealedMemory.data(count: 1 << 20) { $0.initializeMemory(as: UInt8.self, repeating: 7) }
        try receiver.port.send(msgid: 1, components: [.data(plain), .data(sealed)], timeout: waitLimit)
        let messages = try #require(receiver.waitForMessages(1))
        guard case .data(let first) = messages[0].components[0], case .data(let second) = messages[0].components[1] else {
            Issue.record("no data")
            return
        }
        #expect(first.withUnsafeBytes { $0.baseAddress } == plain.withUnsafeBytes { $0.baseAddress })
        #expect(second.withUnsafeBytes { $0.baseAddress } == sealed.withUnsafeBytes { $0.baseAddress })
        #expect(SealedMemory.contains(second))
    }
}

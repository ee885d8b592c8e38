// Guarantees §3.34: a port with `acceptsPortComponents == false` receives no descriptor: in-process
// sends with a port component throw `.portsRefused`; through a send right the kernel refuses
// the frame (SO_PASSRIGHTS, Linux 6.16+: the sender's `send` throws `.portsRefused`), or — on an
// older kernel (injected ENOPROTOOPT) or for frames queued before the port began to refuse — the
// owner drops the frame, closes its descriptors and reports it. Descriptors are followed one by
// one (the peer of each end sent must hang up), and counted in /proc/self/fd in a child process
// of its own (PortPeer `refuse-ports`), where no other test opens any meanwhile.

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

@Suite("§3.34 ports that refuse descriptors")
struct PortRefusalTests {
    @Test("§3.34 an in-process send with a port component throws .portsRefused and queues nothing; Data and a reply port still go through")
    func inProcess() async throws {
        let port = try MessagePort()
        defer { port.invalidate() }
        let component = try MessagePort()
        defer { component.invalidate() }
        #expect(port.acceptsPortComponents)
        port.acceptsPortComponents = false
        #expect(!port.acceptsPortComponents)
        #expect(throws: PortError.portsRefused) { try port.send(msgid: 1, components: [.port(component)], timeout: waitLimit) }
        #expect(throws: PortError.portsRefused) {
            try port.send(msgid: 1, components: [.data(Data("x".utf8)), .port(component)], timeout: waitLimit)
        }
        await #expect(throws: PortError.portsRefused) { try await port.send(msgid: 1, components: [.port(component)]) }
        #expect(port.queuedCount == 0)
        try port.send(msgid: 2, components: [.data(Data("x".utf8))], from: component, timeout: waitLimit)
        try await port.send(msgid: 3, components: [.data(Data("y".utf8)), .data(Data("z".utf8))])
        #expect(port.queuedCount == 2)
        port.acceptsPortComponents = true
        try port.send(msgid: 4, components: [.port(component)], timeout: waitLimit)
        #expect(port.queuedCount == 3)
    }

    @Test("§3.34 through a send right the kernel refuses descriptors: send throws .portsRefused, nothing is delivered, the descriptor never reaches the owner, the right stays usable")
    func kernelRefuses() throws {
        let receiver = try ReceivingPort(name: "refuse-kernel")
        defer { receiver.stop() }
        receiver.port.acceptsPortComponents = false
        let proxy = try MessagePort(sendRight: receiver.port.makeSendRight())
        let (end, sent) = rawSeqPacketPair()
        defer { close(end) }
        do {
            let component = try MessagePort(sendRight: sent)
            #expect(throws: PortError.portsRefused) { try proxy.send(msgid: 1, components: [.port(component)], timeout: waitLimit) }
            #expect(throws: PortError.portsRefused) { try proxy.send(msgid: 2, from: component, timeout: waitLimit) }
            component.invalidate()
        }
        #expect(proxy.isValid)
        try proxy.send(msgid: 3, components: [.data(Data("plain".utf8))], timeout: waitLimit)
        #expect(receiver.waitForMessages(1)?.map(\.msgid) == [3])
        #expect(waitForHangUp(end), "no copy of the component's descriptor is held anywhere")
        #expect(receiver.errors.value.isEmpty)
    }

    @Test("§3.34 without SO_PASSRIGHTS (ENOPROTOOPT, before Linux 6.16): the owner drops each frame with descriptors, closes them and reports it with its sender; the connection carries on")
    func ownerDropsWithoutKernelSupport() throws {
        let receiver = try ReceivingPort(name: "refuse-old-kernel")
        defer { receiver.stop() }
        // The setter and the new send right's receive end set SO_PASSRIGHTS on this thread.
        KernelFault.inject(ENOPROTOOPT, into: .passRights)
        receiver.port.acceptsPortComponents = false
        let right = try receiver.port.makeSendRight()
        KernelFault.clearAll()
        defer { close(right) }
        let (end, sent) = rawSeqPacketPair()
        defer { close(end) }
        try sendRaw(frame(msgid: 1, [.port]), descriptors: [sent], on: right)
        close(sent)
        try sendRaw(frame(msgid: 2, [.data(Array("plain".utf8))]), on: right)
        #expect(receiver.waitForMessages(1)?.map(\.msgid) == [2])
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .portsRefused)
        #expect(report.sender == MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid()))
        #expect(waitForHangUp(end), "the owner closed the descriptor that came with the refused frame")
        #expect(receiver.msgids == [2])
        #expect(receiver.port.connectionCount == 1)
    }

    @Test("§3.34 frames with descriptors queued before the port began to refuse are dropped by the owner, their descriptors closed")
    func queuedBeforeRefusing() throws {
        let port = try MessagePort()
        let thread = ResidentThread(name: "refuse-queued")
        defer {
            port.invalidate()
            thread.stop()
        }
        let delivered = Shared<[UInt32]>([])
        let reported = Shared<[PortError]>([])
        port.setTransportReportHandler { report in reported.update { $0.append(report.error) } }
        thread.runLoop.add(port, forMode: .default)
        let right = try port.makeSendRight()
        defer { close(right) }
        let (end, sent) = rawSeqPacketPair()
        defer { close(end) }
        // No receiver yet: the loop leaves the frames in the kernel.
        try sendRaw(frame(msgid: 1, [.port]), descriptors: [sent], on: right)
        close(sent)
        try sendRaw(frame(msgid: 2), on: right)
        port.acceptsPortComponents = false
        port.setHandler { message in delivered.update { $0.append(message.msgid) } }
        #expect(waitUntil { delivered.value == [2] }, "\(delivered.value)")
        #expect(reported.value == [.portsRefused])
        #expect(waitForHangUp(end))
    }

    @Test("§3.34 no descriptor leaks: /proc/self/fd before and after 100 refused rounds of a process alone (in-process, a port component and a reply port through a send right)")
    func descriptorsCounted() throws {
        let child = try peer(["refuse-ports", "100"])
        #expect(child.finish() == .exited(0), "\(child.output)")
        #expect(child.output.contains("refused 300 delivered 100"), "\(child.output)")
        let line = try #require(child.output.split(separator: "\n").first { $0.hasPrefix("descriptors ") })
        let counts = line.split(separator: " ").dropFirst().compactMap { Int($0) }
        #expect(counts.count == 2 && counts[0] == counts[1], "\(line)")
    }
}

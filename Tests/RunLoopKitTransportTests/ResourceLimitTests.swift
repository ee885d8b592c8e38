// Resource limits: a process out of descriptors gets typed errors and keeps serving what it
// has; a receiving process that is stopped gives its senders backpressure, never loss. Each
// runs in a PortPeer child (Tests/PortPeer/ResourceLimits.swift), since a descriptor limit
// holds for a whole process and tests run side by side in this one.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import Testing
@testable import RunLoopKit

@Suite("Resource limits", .timeLimit(.minutes(2)))
struct ResourceLimitTests {
    @Test("RLIMIT_NOFILE at 64: send rights, named connections and publishing (and a port needing a descriptor) throw .resourceExhausted(EMFILE); existing rights keep delivering; all works again once descriptors are back")
    func descriptorLimit() throws {
        let child = try ChildProcess(portPeer, ["rlimit", uniqueName("rlimit")])
        let exit = child.finish(timeout: .seconds(60))
        #expect(exit == .exited(0), "PortPeer rlimit: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        let output = child.output
        for refused in ["makeSendRight()", "connect(to:)", "publish(as:)"] {
            #expect(output.contains("\(refused) threw resource exhausted"), "\(output)")
        }
        #expect(output.contains("MessagePort() threw resource exhausted") || output.contains("MessagePort() made a port without a descriptor"),
                "\(output)")
        #expect(output.contains("rlimit ok"), "\(output)")
    }

    @Test("a ResidentThread with no descriptor numbers left: the documented precondition failure naming the loop's wake-up eventfd")
    func residentThreadWithoutDescriptors() throws {
        let child = try ChildProcess(portPeer, ["rlimit-thread"])
        let exit = child.finish(timeout: .seconds(60))
        #expect(exit != .exited(0) && exit != nil, "PortPeer rlimit-thread: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("cannot create the wake-up eventfd of the run loop"), "\(child.output)")
    }

    @Test("the receiving process stopped (SIGSTOP) for 100 ms, twice, while 20,000 messages are sent: senders wait, every message arrives once, in order")
    func stoppedReceiver() throws {
        let receiver = try ReceivingPort(name: "rlimit-sink")
        defer { receiver.stop() }
        let sendRight = try receiver.port.makeSendRight()
        let child = try ChildProcess(portPeer, ["sink", "3"], inherit: [(sendRight, 3)])
        close(sendRight)
        let introduction = try #require(receiver.waitForMessages(1), "the sink did not send its port\n\(child.output)")
        let sink = try #require(introduction.first?.port(at: 0))

        let total: UInt32 = 20_000
        for msgid in 0..<total {
            if msgid == 2_000 || msgid == 12_000 {
                child.kill(SIGSTOP)
                let pid = child.pid
                try KernelThread(name: "SIGCONT") {
                    usleep(100_000)
                    _ = Glibc.kill(pid, SIGCONT)
                }.detach()
            }
            // 30 s is a hang guard: a stopped receiver makes the sender wait, never fail.
            try sink.send(msgid: msgid, components: [.data(Data(repeating: 0x5A, count: 64))], timeout: .seconds(30))
        }
        try sink.send(msgid: .max, timeout: .seconds(30))
        let exit = child.finish(timeout: .seconds(60))
        #expect(exit == .exited(0), "PortPeer sink: \(exit.map(\.description) ?? "timed out")\n\(child.output)")
        #expect(child.output.contains("sink received \(total) in order"), "\(child.output)")
    }
}

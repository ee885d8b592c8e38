// Guarantees §3.31: `message.sender?.process` is the process that sent the frame, pinned by a pidfd,
// so pid reuse cannot make it another. Real processes: PortPeer children send; PortPeerC gives a
// new process the pid of one that has exited (clone3 with set_tid, as root).
//
// Kernel refusals (before Linux 6.5, a peer already gone, no descriptor left) are injected into
// the kernel layer (`KernelFault`) on the thread that makes the call: nothing that worked before
// may fail, and `process` is nil where nothing could be pinned.

import Glibc
import FoundationEssentials
import Testing
import CRunLoopKit
@testable import RunLoopKit

/// Waits until `pid` is gone from the process table (reaped by whoever is its parent).
func waitUntilReaped(_ pid: pid_t) -> Bool {
    waitUntil { kill(pid, 0) != 0 && errno == ESRCH }
}

@Suite("§3.31 pinned senders")
struct PinnedSenderTests {
    @Test("§3.31 message.sender?.process is the process that sent that frame, on a send right and on a named connection")
    func processIsTheSender() throws {
        let receiver = try ReceivingPort(name: "pinned-right")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let child = try ChildProcess(portPeer, ["send-right", "3"], inherit: [(right, 3)])
        let message = try #require(receiver.waitForMessages(1)?.first)
        let pinned = try #require(message.sender?.process)
        #expect(pinned.pid == child.pid)
        #expect(pinned.isRunning)
        #expect(pinned == (try PinnedProcess(pid: child.pid)))
        #expect(pinned != (try PinnedProcess(pid: getpid())))
        child.kill(SIGKILL)
        _ = child.wait()
        #expect(!pinned.isRunning)

        let name = uniqueName("pinned-named")
        let named = try ReceivingPort(publishedAs: name)
        defer { named.stop() }
        let client = try peer(["connect-name", name])
        let hello = try #require(named.waitForMessages(1)?.first)
        let connector = try #require(hello.sender?.process, "pinned through SO_PEERPIDFD and the frame's pid")
        #expect(connector.pid == client.pid)
        #expect(client.finish() == .exited(0))
    }

    @Test("§3.31/§3.51 two senders in turn on one send right: each is pinned, also the first frame of the second, which comes without a pidfd")
    func sendersInTurn() throws {
        let receiver = try ReceivingPort(name: "pinned-in-turn")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        // Two frames in a row from the child pin the connection to it: SO_PASSPIDFD goes off.
        let child = try ChildProcess(portPeer, ["send-count", "3", "2"], inherit: [(right, 3)])
        #expect(child.finish() == .exited(0))
        let childFrames = try #require(receiver.waitForMessages(2))
        let pinnedChild = try #require(childFrames[0].sender?.process)
        #expect(pinnedChild.pid == child.pid)
        #expect(childFrames[1].sender?.process == pinnedChild)
        // This process sends on through the same right.
        let proxy = try MessagePort(sendRight: fcntl(right, F_DUPFD_CLOEXEC, 0))
        for msgid: UInt32 in 10..<20 { try proxy.send(msgid: msgid, timeout: waitLimit) }
        let messages = try #require(receiver.waitForMessages(12))
        let own = try PinnedProcess(pid: getpid())
        #expect(messages[2].sender?.pid == getpid())
        for message in messages.dropFirst(2) {
            #expect(message.sender?.process == own, "msgid \(message.msgid)")
        }
    }

    @Test("§3.31/§3.51 a send right handed on: the new holder's first frame is pinned to it, never to the process that connected")
    func handedOnRight() throws {
        let name = uniqueName("pinned-relay")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        defer { receiver.stop() }
        let relay = try peer(["relay-name", name])
        #expect(relay.finish(timeout: .seconds(30)) == .exited(0), "\(relay.output)")
        let messages = try #require(receiver.waitForMessages(2))
        let line = try #require(relay.output.split(separator: "\n").first { $0.hasPrefix("relay ") })
        let third = try #require(Int32(line.split(separator: " ")[3]))
        #expect(messages[0].sender?.pid == relay.pid)
        #expect(messages[1].sender?.pid == third)
        #expect(messages[0].sender?.process?.pid == relay.pid)
        if let process = messages[1].sender?.process {
            #expect(process.pid == third)
            #expect(process != messages[0].sender?.process)
        }
    }

    @Test("§3.31 pid reuse: the sender exits, a new process is given its pid; the pinned process is not running, is not the new one, and cannot signal it",
          .enabled(if: geteuid() == 0, "clone3 with set_tid needs root"))
    func pidReuse() throws {
        // Another process may take the pid between the sender's reaping and the respawn: then
        // PortPeerC reports EEXIST and the scenario runs again with a new sender.
        for _ in 0..<10 {
            let receiver = try ReceivingPort(name: "pid-reuse")
            defer { receiver.stop() }
            let right = try receiver.port.makeSendRight()
            // Three frames: the first two bring pidfds, the third is pinned through the
            // connection as it is read, and first asked about after the pid was given away.
            let sender = try ChildProcess(portPeer, ["send-count", "3", "3"], inherit: [(right, 3)])
            close(right)
            let messages = try #require(receiver.waitForMessages(3))
            let pinned = try #require(messages[0].sender?.process)
            #expect(sender.finish() == .exited(0), "\(sender.output)")
            let pid = sender.pid
            #expect(waitUntilReaped(pid))

            let respawn = try ChildProcess(portPeerC, ["spawn-with-pid", "\(pid)", "/bin/sleep", "60"])
            defer { respawn.kill(SIGKILL) }
            #expect(respawn.waitForOutput("spawn"), "\(respawn.output)")
            if respawn.output.contains("EEXIST") { continue }
            #expect(respawn.output.contains("spawned \(pid)"), "\(respawn.output)")
            let newcomer = try PinnedProcess(pid: pid)
            defer { try? newcomer.sendSignal(SIGKILL) }
            #expect(newcomer.isRunning)

            #expect(messages.allSatisfy { $0.sender?.pid == pid }, "the kernel's pid, uid and gid are unchanged")
            #expect(!pinned.isRunning)
            #expect(pinned != newcomer)
            #expect(throws: PortError.processNotFound(pid)) { try pinned.sendSignal(SIGTERM) }
            #expect(crlk_pidfd_send_signal(pinned.descriptor, SIGTERM) == -1 && errno == ESRCH)
            #expect(newcomer.isRunning, "the signal never reached the process that has the pid now")
            // Pinned through the connection when it was read: its sender, never the newcomer.
            #expect(messages[2].sender?.process == pinned)
            #expect(messages[1].sender?.process == pinned)
            return
        }
        Issue.record("the sender's pid was taken by another process ten times in a row")
    }

    @Test("§3.31 a pinned frame asked about while its sender still runs stays pinned after the sender exits")
    func confirmedStaysPinned() throws {
        let receiver = try ReceivingPort(name: "pinned-confirmed")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let child = try ChildProcess(portPeer, ["send-right", "3"], inherit: [(right, 3)])
        _ = try #require(receiver.waitForMessages(1))
        let proxy = try MessagePort(sendRight: fcntl(right, F_DUPFD_CLOEXEC, 0))
        for msgid: UInt32 in 10..<13 { try proxy.send(msgid: msgid, timeout: waitLimit) }
        let messages = try #require(receiver.waitForMessages(4))
        let own = try PinnedProcess(pid: getpid())
        #expect(messages[3].sender?.process == own, "confirmed now, while this process runs")
        child.kill(SIGKILL)
        _ = child.wait()
        #expect(messages[3].sender?.process == own, "the verdict holds")
    }

    // MARK: - Where the kernel says no

    @Test("§3.31 SO_PASSPIDFD refused (ENOPROTOOPT or EINVAL, before Linux 6.5): frames are delivered as before, process nil",
          arguments: [ENOPROTOOPT, EINVAL])
    func passPidfdRefused(_ code: Int32) throws {
        let receiver = try ReceivingPort(name: "no-passpidfd")
        defer { receiver.stop() }
        // The send right's receive end is set up on this thread.
        KernelFault.inject(code, into: .passPidfd)
        defer { KernelFault.clearAll() }
        let right = try receiver.port.makeSendRight()
        defer { close(right) }
        let child = try ChildProcess(portPeer, ["send-count", "3", "2"], inherit: [(right, 3)])
        #expect(child.finish() == .exited(0))
        let messages = try #require(receiver.waitForMessages(2))
        #expect(messages.map(\.sender?.pid) == [child.pid, child.pid])
        #expect(messages.allSatisfy { $0.sender?.process == nil })
        #expect(receiver.errors.value.isEmpty)
    }

    @Test("§3.31 the kernel could not make a frame's pidfd (ESRCH: its sender gone; EMFILE): that frame is delivered unpinned, the next one pinned",
          arguments: [ESRCH, EMFILE])
    func receivedPidfdFailed(_ code: Int32) throws {
        let receiver = try ReceivingPort(name: "no-scm-pidfd")
        defer { receiver.stop() }
        let right = try receiver.port.makeSendRight()
        let proxy = try MessagePort(sendRight: right)
        try receiver.onLoopThread { KernelFault.inject(code, into: .receivedPidfd) }
        try proxy.send(msgid: 1, timeout: waitLimit)
        _ = try #require(receiver.waitForMessages(1))
        try receiver.onLoopThread { KernelFault.clearAll() }
        try proxy.send(msgid: 2, timeout: waitLimit)
        let messages = try #require(receiver.waitForMessages(2))
        #expect(messages[0].sender?.pid == getpid())
        #expect(messages[0].sender?.process == nil)
        #expect(messages[1].sender?.process == (try PinnedProcess(pid: getpid())))
        #expect(receiver.errors.value.isEmpty)
    }

    @Test("§3.31 SO_PEERPIDFD refused on a named connection (ENOPROTOOPT, ESRCH, EMFILE, EINVAL): its frames are pinned through SO_PASSPIDFD instead",
          arguments: [ENOPROTOOPT, ESRCH, EMFILE, EINVAL])
    func peerPidfdRefused(_ code: Int32) throws {
        let name = uniqueName("no-peerpidfd")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        try receiver.onLoopThread { KernelFault.inject(code, into: .peerPidfd) }
        let proxy = try MessagePort.connect(to: name)
        try proxy.send(msgid: 1, timeout: waitLimit)
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender?.process == (try PinnedProcess(pid: getpid())))
        try receiver.onLoopThread { KernelFault.clearAll() }
    }

    @Test("§3.31 neither SO_PEERPIDFD nor SO_PASSPIDFD (a kernel before 6.5): named connections work as before, process nil")
    func noPidfdsAtAll() throws {
        let name = uniqueName("no-pidfds")
        let receiver = try ReceivingPort(publishedAs: name)
        defer { receiver.stop() }
        try receiver.onLoopThread {
            KernelFault.inject(ENOPROTOOPT, into: .peerPidfd)
            KernelFault.inject(ENOPROTOOPT, into: .passPidfd)
        }
        defer { try? receiver.onLoopThread { KernelFault.clearAll() } }
        let client = try peer(["connect-name", name])
        #expect(client.finish() == .exited(0))
        let message = try #require(receiver.waitForMessages(1)?.first)
        #expect(message.sender == MessagePort.Sender(pid: client.pid, uid: geteuid(), gid: getegid()))
        #expect(message.sender?.process == nil)
        #expect(receiver.errors.value.isEmpty)
    }

    @Test("§3.31 PinnedProcess(pid:): .processNotFound for no such process (ESRCH, EINVAL, ENOSYS), .resourceExhausted for EMFILE")
    func pinningByPid() throws {
        #expect(try PinnedProcess(pid: getpid()).isRunning)
        #expect(throws: PortError.processNotFound(Int32.max)) { _ = try PinnedProcess(pid: Int32.max) }
        for code in [ESRCH, EINVAL, ENOSYS] {
            KernelFault.inject(code, into: .pidfdOpen)
            #expect(throws: PortError.processNotFound(getpid())) { _ = try PinnedProcess(pid: getpid()) }
        }
        KernelFault.inject(EMFILE, into: .pidfdOpen)
        #expect(throws: PortError.resourceExhausted(errno: EMFILE)) { _ = try PinnedProcess(pid: getpid()) }
        KernelFault.clearAll()
        #expect(try PinnedProcess(pid: getpid()).isRunning)
    }
}

@Suite("§3.51 frames read after their sender was reaped", .timeLimit(.minutes(2)))
struct ReapedSenderTests {
    @Test("§3.51 a sender that sends and exits, reaped before its frames are read: every frame is pinned to it")
    func framesReadAfterReaping() throws {
        // The port joins a loop only once the sender is gone: its frames wait in the kernel.
        let port = try MessagePort()
        let right = try port.makeSendRight()
        let sender = try ChildProcess(portPeer, ["send-count", "3", "4"], inherit: [(right, 3)])
        close(right)
        #expect(sender.finish() == .exited(0), "\(sender.output)")
        #expect(waitUntilReaped(sender.pid))
        let received = Shared<[MessagePort.Message]>([])
        port.setHandler { message in received.value.append(message) }
        let thread = ResidentThread(name: "reaped-sender")
        defer { thread.stop() }
        thread.runLoop.add(port, forMode: .default)
        defer { port.invalidate() }
        #expect(waitUntil { received.value.count == 4 })
        let messages = received.value
        #expect(messages.map(\.msgid) == [0, 1, 2, 3])
        // The first two bring pidfds of their own; the others are pinned through the connection.
        let pinned = try #require(messages.first?.sender?.process, "the first frame's pidfd")
        #expect(pinned.pid == sender.pid)
        for message in messages {
            #expect(message.sender?.process == pinned, "msgid \(message.msgid)")
        }
    }
}

import CBenchmarkPeers
import Foundation
import RunLoopKit

/// The `xprocess` workload for RunLoopKit: MessagePorts across a process boundary
/// (the socketpair transport, Protocols/port-message-frame.md), against the C SEQPACKET socketpair ping-pong.
///
/// The initiator (this case's process) owns port P on a ResidentThread's loop and spawns a
/// responder process — this executable with `--xprocess-echo` — that inherits a send right
/// to P. The responder owns port Q on its main thread's loop and says hello to P with Q as
/// the reply port, so P's handler gets a proxy for Q; from then on P pings through that
/// proxy and the responder echoes each message's components back through its proxy for P.
/// One long-lived proxy each way, as a daemon and its helper would hold: a reply port per
/// message would cost a socketpair per message.
///
/// Senders are pinned: each side checks that its peer's first message names a
/// pinned process, the peer's own; later messages are pinned through their connection, which
/// costs a check only when a handler asks for `sender.process`, and these handlers do not.
///
/// Same CPU: the responder stores `sched_getcpu` in a `bench_responder_cell` (memfd shared
/// with this process) before each echo, as the C responder does in its shared page and the
/// in-process responders in an atomic, so the column compares both sides of every sample.
/// The allocation columns count this process only (the responder's are not reported).
extension RunLoopKitPeer {
    /// The responder's first message, carrying Q as its reply port. Pings and echoes are
    /// msgid 1 (see `data(of:)`).
    static let helloMsgid: UInt32 = 2
    /// How long the initiator waits for the responder to exit once P is invalidated.
    private static let responderExitTimeout = Duration.seconds(10)

    /// `named`: the `xnamed` row. P is published under a name and the responder connects to
    /// it with `MessagePort.connect(to:)` instead of inheriting a send right; everything after
    /// the connection is the same.
    /// `payloadBytes`: the `xpayloads` scale row. Each ping carries one block of that many bytes
    /// (`Payloads.block`) and its sequence number as the msgid, and the responder checks both.
    static func crossProcessPingPong(_ plan: LatencyPlan, named: Bool = false,
                                     payloadBytes: Int? = nil) -> LatencyMeasurement {
        let block = payloadBytes.map(Payloads.block)
        @Sendable func ping(_ port: MessagePort, _ seq: UInt64) {
            if let block {
                sendBlock(to: port, msgid: UInt32(truncatingIfNeeded: seq), [.data(block)], from: nil)
            } else {
                send(to: port, Payloads.sequence(seq), from: nil)
            }
        }
        @Sendable func pong(_ message: MessagePort.Message) -> UInt64? {
            if let payloadBytes { return blockSequence(of: message, bytes: payloadBytes) }
            return Payloads.sequence(of: data(of: message))
        }
        var cellDescriptor: Int32 = -1
        guard let cell = bench_responder_cell_create(&cellDescriptor) else {
            fail("RunLoopKit: cannot create the shared responder cell (memfd)")
        }
        let initiator = ResidentThread(name: "xprocess-initiator")
        let port = makePort()
        let trips = RoundTrips(peer: .runLoopKit, plan: plan, remoteResponder: cell)
        let responder = ResponderLink()
        port.setHandler { message in
            if let responderPort = responder.port {
                if let next = trips.initiatorReceived(pong(message)) { ping(responderPort, next) }
                return
            }
            guard message.msgid == helloMsgid, message.components.isEmpty,
                  let responderPort = message.replyPort, responderPort.isProxy else {
                fail("RunLoopKit: the responder's first message was not its hello with a reply port")
            }
            guard let sender = message.sender, sender.process?.pid == sender.pid else {
                fail("RunLoopKit: the responder's hello was not pinned to its process (\(String(describing: message.sender)))")
            }
            responder.port = responderPort
            // On this loop, the proxy notices the responder hanging up (its process died)
            // instead of the run waiting for an echo until the case times out.
            responderPort.setInvalidationHandler { _ in
                fail("RunLoopKit: the responder process hung up during the run")
            }
            ThreadRunLoop.current.add(responderPort, forMode: .default)
            ping(responderPort, trips.firstPing())
        }
        initiator.runLoop.add(port, forMode: .default)

        let pid: pid_t
        let sizeArguments = payloadBytes.map { ["--xprocess-echo-bytes", String($0)] } ?? []
        if named {
            let name = "rlk-bench-xnamed-\(getpid())"
            do { try port.publish(as: name) } catch { fail("RunLoopKit: publish(as: \(name)): \(error)") }
            // Spawned after `Pinning.apply`: in the pinned regime it inherits the one-CPU mask.
            pid = spawnResponder(["--xprocess-echo-named", name, String(cellDescriptor)] + sizeArguments)
        } else {
            let sendRight: Int32
            do { sendRight = try port.makeSendRight(inheritable: true) } catch {
                fail("RunLoopKit: makeSendRight(inheritable: true): \(error)")
            }
            pid = spawnResponder(["--xprocess-echo", String(sendRight), String(cellDescriptor)] + sizeArguments)
            close(sendRight)
        }
        close(cellDescriptor)

        let measurement = trips.waitForCompletion()
        // The responder leaves when P's connection hangs up; from here on that is expected.
        responder.port?.setInvalidationHandler(nil)
        port.invalidate()
        responder.port?.invalidate()
        let status = waitForExit(pid)
        guard status == 0 else { fail("RunLoopKit: the responder process exited with status \(status)") }
        trips.checkAnswered(bench_responder_cell_answered(cell))
        initiator.stop()
        bench_responder_cell_unmap(cell)
        return measurement
    }

    /// The responder process (`--xprocess-echo`): echoes until P's owner hangs up, then
    /// exits 0. Runs nothing else: no case, no pinning, no plans.
    static func serveCrossProcessEcho(_ echo: Options.CrossProcessEcho) -> Never {
        guard let mapped = bench_responder_cell_map(echo.cellDescriptor) else {
            fail("RunLoopKit responder: cannot map the shared responder cell")
        }
        let cell = ResponderCell(pointer: mapped)
        close(echo.cellDescriptor)
        let toInitiator: MessagePort
        do {
            switch echo.initiator {
            case .sendRight(let descriptor): toInitiator = try MessagePort(sendRight: descriptor)
            case .name(let name): toInitiator = try MessagePort.connect(to: name)
            }
        } catch {
            fail("RunLoopKit responder: reaching the initiator's port (\(echo.initiator)): \(error)")
        }
        let loop = ThreadRunLoop.current
        let port = makePort()
        let answered = Counter()
        port.setHandler { message in
            let seq = if let bytes = echo.payloadBytes { blockSequence(of: message, bytes: bytes) }
                      else { Payloads.sequence(of: data(of: message)) }
            guard let seq, seq == answered.value + 1 else {
                fail("RunLoopKit responder: received ping \(seq.map(String.init) ?? "(malformed)"), expected \(answered.value + 1)")
            }
            if seq == 1, message.sender?.process?.pid != getppid() {
                fail("RunLoopKit responder: the first ping was not pinned to the initiator (\(String(describing: message.sender)))")
            }
            answered.value = seq
            bench_responder_cell_answer(cell.pointer, seq)
            do {
                // The one Data component was checked above.
                try toInitiator.send(msgid: message.msgid, components: [.data(message.data!)], timeout: sendTimeout)
            } catch PortError.invalidPort {
                loop.stop()  // the initiator is gone: it is the one to report why
            } catch {
                fail("RunLoopKit responder: echo failed: \(error)")
            }
        }
        // The dead-name notice: P invalidated (the run is over) or its process gone.
        toInitiator.setInvalidationHandler { _ in loop.stop() }
        loop.add(port, forMode: .default)
        loop.add(toInitiator, forMode: .default)
        do {
            try toInitiator.send(msgid: helloMsgid, from: port, timeout: sendTimeout)
        } catch {
            fail("RunLoopKit responder: hello failed: \(error)")
        }
        loop.run()
        exit(0)
    }

    /// posix_spawn of this executable as the responder. The two descriptors cross exec
    /// because they are not close-on-exec; the responder's stdout goes to /dev/null, so
    /// that it never holds the pipe the parent of this case reads its result from.
    private static func spawnResponder(_ responderArguments: [String]) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0)
        // The executable's own path rather than /proc/self/exe, so that ps names it.
        let path = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "/proc/self/exe"
        let arguments = [path] + responderArguments
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for argument in argv { free(argument) } }
        var pid: pid_t = 0
        let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
        guard result == 0 else { fail("RunLoopKit: posix_spawn \(path): \(String(cString: strerror(result)))") }
        return pid
    }

    /// Reaps the responder: its exit status, 128 + the signal that killed it, or a
    /// failure when it has not exited within `responderExitTimeout` (it is killed then).
    private static func waitForExit(_ pid: pid_t) -> Int32 {
        let deadline = ContinuousClock.now + responderExitTimeout
        while true {
            var status: Int32 = 0
            let reaped = waitpid(pid, &status, WNOHANG)
            if reaped == pid {
                let signal = status & 0x7f
                return signal == 0 ? (status >> 8) & 0xff : 128 + signal
            }
            if reaped < 0 && errno != EINTR { fail("RunLoopKit: waitpid: \(String(cString: strerror(errno)))") }
            if ContinuousClock.now >= deadline {
                kill(pid, SIGKILL)
                _ = waitpid(pid, &status, 0)
                fail("RunLoopKit: the responder process did not exit within \(responderExitTimeout) of P's invalidation")
            }
            usleep(1_000)
        }
    }
}

/// The initiator's proxy for the responder's port Q: set by P's handler on the initiator's
/// thread, then read there, and by the main thread only after the run completed.
private final class ResponderLink: @unchecked Sendable {
    var port: MessagePort?
}

/// The cell the responder shares with the initiator. `@unchecked Sendable`: its fields are
/// only stored and loaded atomically (`bench_responder_cell_answer` and the loads beside it).
private struct ResponderCell: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<bench_responder_cell>
}

/// The responder's count of answered pings; its main thread only.
private final class Counter: @unchecked Sendable {
    var value: UInt64 = 0
}

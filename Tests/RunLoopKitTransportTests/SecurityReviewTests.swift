// Guarantees §3.51, §3.53, §3.57, §3.61, §3.62 and the rate limit of refused-peer reports: the
// attacks of a security review, each reproduced. (§3.60 is with §3.32 in ForgedSenderTests.)

import CRunLoopKit  // owns the socket constants in a compile where another file imports it
import Glibc
import FoundationEssentials
import Testing
@testable import RunLoopKit

/// A forger for §3.61, run inside `unshare -Urpf` (a user and pid namespace it made, no
/// privilege): connects to an abstract address, starts a decoy (/bin/sleep) and names the
/// decoy's pid in SCM_CREDENTIALS — in the HELLO (`hello`) or, after an honest HELLO, in a
/// frame (`frame`). Prints the answer and whether the owner dropped it.
private let forgerScript = """
import os, socket, struct, subprocess, sys, time
address, hello, frame, mode = bytes.fromhex(sys.argv[1]), bytes.fromhex(sys.argv[2]), bytes.fromhex(sys.argv[3]), sys.argv[4]
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect(b"\\0" + address)
decoy = subprocess.Popen(["/bin/sleep", "30"])
forged = [(socket.SOL_SOCKET, 2, struct.pack("iII", decoy.pid, os.getuid(), os.getgid()))]
try:
    s.sendmsg([hello], forged if mode == "hello" else [])
    answer = s.recv(64)
    print("answer", answer[5] if len(answer) > 5 else "none", flush=True)
    if mode == "frame" and len(answer) > 5 and answer[5] == 2:
        s.sendmsg([frame], forged)
        print("forgery sent", flush=True)
        s.settimeout(10)
        print("dropped" if s.recv(64) == b"" else "not dropped", flush=True)
except OSError as error:
    print("error", error, flush=True)
time.sleep(20)
"""

private let python = "/usr/bin/python3"

/// The command that runs `arguments` inside a new user and pid namespace, as nobody when this
/// process is root (the attack needs no privilege).
private func inUserNamespace(_ arguments: [String]) -> (String, [String]) {
    let unshare = ["unshare", "-Urpf", "--kill-child"] + arguments
    if geteuid() == 0 {
        return ("/usr/bin/setpriv", ["--reuid", "\(nobody)", "--regid", "\(nogroup)", "--clear-groups"] + unshare)
    }
    return ("/usr/bin/unshare", Array(unshare.dropFirst()))
}

/// Whether this host lets an unprivileged process make a user and pid namespace (and has the
/// tools the test uses).
private let userNamespacesWork: Bool = {
    guard access(python, X_OK) == 0, access("/usr/bin/unshare", X_OK) == 0, access("/usr/bin/setpriv", X_OK) == 0,
          access("/bin/sleep", X_OK) == 0 else { return false }
    let (executable, arguments) = inUserNamespace(["/bin/true"])
    guard let child = try? ChildProcess(executable, arguments) else { return false }
    return child.finish() == .exited(0)
}()

private func hex(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef")
    return String(bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
}

/// The name of the command of process `pid` ("sleep"), nil when there is none.
private func command(of pid: Int32) -> String? {
    guard let file = fopen("/proc/\(pid)/comm", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 64)
    guard fgets(&line, 64, file) != nil else { return nil }
    return String(cString: line).split(separator: "\n").first.map(String.init)
}

@Suite("Security review")
struct SecurityReviewTests {
    // MARK: §3.61

    @Test("§3.61 a HELLO whose SCM_CREDENTIALS name a decoy, from a user and pid namespace the peer made without privilege: denied, reported as forged with who connected",
          .enabled(if: userNamespacesWork, "unprivileged user namespaces are disabled here (or unshare, setpriv, python3 are missing)"))
    func forgedHelloFromUserNamespace() throws {
        let name = uniqueName("userns-hello")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        defer { receiver.stop() }
        let address = try PortName(name).address(uid: geteuid())
        let (executable, arguments) = inUserNamespace([python, "-c", forgerScript, hex(address),
                                                        hex(Handshake.hello(name: Array(name.utf8)).encode()), "00", "hello"])
        let forger = try ChildProcess(executable, arguments)
        defer { forger.kill(SIGKILL) }
        #expect(forger.waitForOutput("answer"), "\(forger.output)")
        #expect(forger.output.contains("answer 3"), "DENIED: \(forger.output)")
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .forgedCredentials)
        let claimed = try #require(report.sender?.pid)
        let connector = try #require(report.connector)
        #expect(claimed != connector.pid)
        #expect(command(of: claimed) == "sleep", "the claimed pid is the decoy's")
        #expect(connector.uid == (geteuid() == 0 ? nobody : geteuid()))
        #expect(receiver.messages.value.isEmpty)
    }

    @Test("§3.61 after an honest HELLO, a frame whose SCM_CREDENTIALS name a decoy in the peer's own pid namespace: refused, the connection dropped, nothing delivered",
          .enabled(if: userNamespacesWork, "unprivileged user namespaces are disabled here (or unshare, setpriv, python3 are missing)"))
    func forgedFrameFromUserNamespace() throws {
        let name = uniqueName("userns-frame")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        defer { receiver.stop() }
        let address = try PortName(name).address(uid: geteuid())
        let (executable, arguments) = inUserNamespace([python, "-c", forgerScript, hex(address),
                                                        hex(Handshake.hello(name: Array(name.utf8)).encode()),
                                                        hex(frame(msgid: 61)), "frame"])
        let forger = try ChildProcess(executable, arguments)
        defer { forger.kill(SIGKILL) }
        #expect(forger.waitForOutput("dropped"), "\(forger.output)")
        #expect(forger.output.contains("answer 2"), "WELCOME to the honest HELLO: \(forger.output)")
        #expect(forger.output.contains("forgery sent\ndropped"), "\(forger.output)")
        let report = try #require(receiver.waitForReport())
        #expect(report.error == .forgedCredentials)
        let claimed = try #require(report.sender?.pid)
        #expect(claimed != report.connector?.pid)
        #expect(command(of: claimed) == "sleep", "the claimed pid is the decoy's")
        #expect(receiver.messages.value.isEmpty)
    }

    // MARK: §3.51

    @Test("§3.51 a child connects, sends one frame and hands its right to a third process that sends three: every frame's process is its sender, also asked after the connector was reaped")
    func handedOnFramesArePinned() throws {
        let name = uniqueName("pinned-hand-on")
        let receiver = try ReceivingPort(publishedAs: name, access: .anyone)
        let relay = try peer(["relay-name", name, "3"])
        let messages = try #require(receiver.waitForMessages(4), "\(relay.output)")
        let line = try #require(relay.output.split(separator: "\n").first { $0.hasPrefix("relay ") })
        let third = try #require(Int32(line.split(separator: " ")[3]))
        let thirds = messages.dropFirst()
        #expect(thirds.allSatisfy { $0.sender?.pid == third })
        let pinnedThird = try #require(messages[1].sender?.process, "the first frame of the process the right was handed to")
        #expect(pinnedThird.pid == third)
        #expect(pinnedThird == (try PinnedProcess(pid: third)))
        #expect(thirds.allSatisfy { $0.sender?.process == pinnedThird })
        // The owner drops the connection; the third process and then the connector exit.
        receiver.stop()
        #expect(relay.finish(timeout: .seconds(30)) == .exited(0), "\(relay.output)")
        #expect(waitUntilReaped(relay.pid))
        // The connector's own frame, sent just after connecting and before handing the right on,
        // first asked about now.
        let connector = try #require(messages[0].sender?.process)
        #expect(connector.pid == relay.pid)
        #expect(!connector.isRunning)
        #expect(connector != pinnedThird)
    }

    // MARK: §3.53

    @Test("§3.53 connect(to:publishedBy:timeout:) gives up after the timeout when the owner does not answer: .handshakeTimedOut, which says so; the forms without a timeout still resolve")
    func connectTimeout() throws {
        let name = uniqueName("no-answer")
        // Published, never on a running loop: the listener takes connections nobody answers.
        let silent = try MessagePort()
        defer { silent.invalidate() }
        try silent.publish(as: name)
        #expect(throws: PortError.handshakeTimedOut) { _ = try MessagePort.connect(to: name, timeout: .milliseconds(200)) }
        #expect(throws: PortError.handshakeTimedOut) {
            _ = try MessagePort.connect(to: name, publishedBy: geteuid(), timeout: .milliseconds(200))
        }
        #expect(PortError.handshakeTimedOut.description.contains("did not answer the handshake in time"))
        #expect(!PortError.handshakeTimedOut.description.contains("queue"))

        let answered = uniqueName("answered")
        let receiver = try ReceivingPort(publishedAs: answered)
        defer { receiver.stop() }
        let forms = [try MessagePort.connect(to: answered), try MessagePort.connect(to: answered, publishedBy: geteuid()),
                     try MessagePort.connect(to: answered, timeout: .seconds(10))]
        for (index, proxy) in forms.enumerated() { try proxy.send(msgid: UInt32(index), timeout: waitLimit) }
        #expect(receiver.waitForMessages(3) != nil)
        #expect(throws: PortError.nameNotFound(name + "x")) { _ = try MessagePort.connect(to: name + "x", timeout: .seconds(1)) }
    }

    // MARK: §3.57

    @Test("§3.57 a frame whose descriptors the owner, out of descriptors, could not install: counted as discarded, reported as .resourceExhausted, and the sender keeps its connection")
    func ownExhaustionKeepsTheSender() throws {
        let name = uniqueName("starved")
        let owner = try peer(["starve", name])
        defer { owner.kill(SIGKILL) }
        #expect(owner.waitForOutput("published"), "\(owner.output)")
        let server = try MessagePort.connect(to: name)
        try server.send(msgid: 1, timeout: waitLimit)
        #expect(owner.waitForOutput("starved"), "\(owner.output)")
        let carried = try MessagePort()
        defer { carried.invalidate() }
        try server.send(msgid: 2, components: [.port(carried)], timeout: waitLimit)
        try server.send(msgid: 3, timeout: waitLimit)
        #expect(owner.waitForOutput("discarded"), "\(owner.output)")
        try server.send(msgid: 4, components: [.port(carried)], timeout: waitLimit)
        #expect(owner.finish() == .exited(0), "\(owner.output)")
        let output = owner.output
        #expect(!output.contains("got 2"), "\(output)")
        #expect(output.contains("report resource exhausted"), "\(output)")
        #expect(output.contains("sent by pid \(getpid())"), "the report says who sent it: \(output)")
        #expect(!output.contains("malformed"), "\(output)")
        #expect(output.contains("got 3 ports 0\ndiscarded 1"), "\(output)")
        #expect(output.contains("got 4 ports 1"), "the same connection carries ports again: \(output)")
        #expect(server.isValid)
    }

    // MARK: §3.62

    @Test("§3.62 the default per-user limit fits RLIMIT_NOFILE: a quarter of what the budget holds, at most 1,024")
    func fittedLimit() {
        #expect(MessagePort.NameLimits.fitting(descriptorLimit: 1024) == 112)
        #expect(MessagePort.NameLimits.fitting(descriptorLimit: 524_288) == 1024)
        #expect(MessagePort.NameLimits.fitting(descriptorLimit: 64) == 1)
        #expect(MessagePort.NameLimits.default.connectionsPerUser
                == MessagePort.NameLimits.fitting(descriptorLimit: MessagePort.NameLimits.softDescriptorLimit))
    }

    @Test("§3.62 under a soft RLIMIT_NOFILE of 1,024, one uid holding every connection it may leaves another uid able to connect and be served",
          .enabled(if: geteuid() == 0, "needs root to run children as two other uids"))
    func oneUserCannotTakeEveryDescriptor() throws {
        let name = uniqueName("budget")
        let daemon = try peer(["serve-fitted", name])
        defer { daemon.kill(SIGKILL) }
        #expect(daemon.waitForOutput("published limit"), "\(daemon.output)")
        #expect(daemon.output.contains("published limit 112"), "\(daemon.output)")
        let hog = try ChildProcess(portPeer, ["as", "65533", "65533", "hold-name", name])
        defer { hog.kill(SIGKILL) }
        #expect(hog.waitForOutput("held", timeout: .seconds(60)), "\(hog.output)")
        #expect(hog.output.contains("held 112: \(PortError.tooManyConnections)"), "\(hog.output)")
        let other = try peer(["request-name", name, "3"], asNobody: true)
        #expect(other.finish(timeout: .seconds(30)) == .exited(0), "\(other.output)")
        #expect(other.output.contains("ok 3"), "\(other.output)")
        #expect(!daemon.output.contains("resource exhausted"), "\(daemon.output)")
    }

    // MARK: Refused-peer reports

    @Test("a flood of 1,000 refused handshakes (200 under a sanitizer) gives a bounded number of reports: the first 10 in full, then one that counts the rest")
    func refusedReportsAreRateLimited() throws {
        // 200 under a sanitizer: each refused handshake is a connect, slow when instrumented.
        let flood = underSanitizer ? 200 : 1000
        let name = uniqueName("refused-flood")
        let receiver = try ReceivingPort(publishedAs: name, access: .users([nobody]))
        defer { receiver.stop() }
        let throttle = try #require(receiver.port.lock.withLock { receiver.port.state.publication?.reports })
        throttle.configure(burst: ReportThrottle.defaultBurst, interval: .seconds(3600))
        for _ in 0..<flood {
            #expect(throws: PortError.accessDenied) { _ = try MessagePort.connect(to: name) }
        }
        // The client is refused before the owner reports it: wait for all 1,000 reports.
        #expect(waitUntil { throttle.offered == flood })
        #expect(receiver.reports.value.count == ReportThrottle.defaultBurst)
        // The interval is over: the next refusal carries the count of those left out.
        throttle.configure(burst: ReportThrottle.defaultBurst, interval: .zero)
        #expect(throws: PortError.accessDenied) { _ = try MessagePort.connect(to: name) }
        #expect(waitUntil { receiver.reports.value.count == ReportThrottle.defaultBurst + 1 })
        let reports = receiver.reports.value
        #expect(reports.count == ReportThrottle.defaultBurst + 1)
        #expect(reports.allSatisfy { $0.error == .accessDenied && $0.connector?.pid == getpid() })
        #expect(reports.reduce(0) { $0 + 1 + $1.suppressed } == flood + 1)
        #expect(reports.last?.suppressed == flood - ReportThrottle.defaultBurst)
        #expect(reports.last?.description.contains("\(flood - ReportThrottle.defaultBurst) more reports of refused peers were left out") == true)
    }
}

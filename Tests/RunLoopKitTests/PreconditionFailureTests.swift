// DESIGN §2 ("Running. Only on the loop's own thread — anything else: precondition
// failure with a message naming the mistake") and §3.16 ("scheduling [a port] on a
// second loop is a precondition failure naming the mistake").
//
// A precondition failure cannot be caught in-process, so each case re-executes this
// test binary (/proc/self/exe) running only `PreconditionCrashEntry`, with
// RUNLOOPKIT_CRASH_CASE naming the misuse to commit. The parent asserts that the
// child died by a signal (SIGILL or SIGTRAP) and that its stderr names the mistake.

import Glibc
import RunLoopKit
import Synchronization
import Testing

private let crashCaseVariable = "RUNLOOPKIT_CRASH_CASE"

enum CrashCase: String, CaseIterable, Sendable {
    case runModeForFromWrongThread
    case runModeBeforeFromWrongThread
    case runFromWrongThread
    case runUntilFromWrongThread
    case portOnSecondRunLoop
    case publishProxy

    var expectedMessage: String {
        switch self {
        case .portOnSecondRunLoop: "second run loop"
        case .publishProxy: "only a local port can be published"
        default: "on its own thread"
        }
    }
}

/// The child side: commits the misuse named in RUNLOOPKIT_CRASH_CASE. Skipped in normal runs.
@Suite("Precondition crash entry (child process only)")
struct PreconditionCrashEntry {
    @Test("child: commit the misuse named by RUNLOOPKIT_CRASH_CASE",
          .enabled(if: environment(crashCaseVariable) != nil))
    func commitMisuse() throws {
        let which = try #require(environment(crashCaseVariable).flatMap(CrashCase.init(rawValue:)))
        // A loop owned by another, still living thread, with something to run.
        let release = Flag()
        let owner = LoopThread { loop -> Bool in
            waitUntil(timeout: .seconds(600)) { release.isSet }
        }
        let loop = owner.loop
        loop.add(keepAliveSource(), forMode: .default)
        switch which {
        case .runModeForFromWrongThread:
            _ = loop.run(mode: .default, for: .seconds(1), returnAfterSourceHandled: false)
        case .runModeBeforeFromWrongThread:
            _ = loop.run(mode: .default, before: .now + .seconds(1))
        case .runFromWrongThread:
            loop.add(RunLoopTimer(fireAt: .now + .seconds(1)) { _ in loop.stop() }, forMode: .default)
            loop.run()
        case .runUntilFromWrongThread:
            loop.run(until: .now + .seconds(1))
        case .publishProxy:
            break
        case .portOnSecondRunLoop:
            let port = try MessagePort()
            let release2 = Flag()
            let second = LoopThread { _ -> Bool in waitUntil(timeout: .seconds(600)) { release2.isSet } }
            loop.add(port, forMode: .default)
            second.loop.add(port, forMode: .default)
            // If the check is deferred until the second loop runs, make it run.
            second.loop.perform {}
            _ = onFreshThread(timeout: .seconds(5)) { () -> Bool in
                second.loop.add(keepAliveSource(), forMode: .default)
                return true
            }
            release2.set()
        }
        if which == .publishProxy {
            let local = try MessagePort()
            let proxy = try MessagePort(sendRight: try local.makeSendRight())
            try proxy.publish(as: "rlk-crash-\(getpid())")
        }
        release.set()
        // Reaching this point means no precondition failure: exit normally so the parent sees it.
    }
}

/// Result of a child run.
struct ChildOutcome: Sendable {
    var signal: Int32?      // terminating signal, if killed by one
    var exitCode: Int32?    // exit status, if it exited
    var stderr: String
}

/// Re-executes this test binary with swift-testing, filtered to the crash entry.
func runCrashChild(_ which: CrashCase, timeout: Duration = .seconds(120)) -> ChildOutcome? {
    let exe = "/proc/self/exe"
    let args = [exe, "--testing-library", "swift-testing", "--filter", "PreconditionCrashEntry"]
    // Environment: ours (from /proc/self/environ), plus the case, minus the backtracer.
    var env = (readSmallFile("/proc/self/environ") ?? "")
        .split(separator: "\0").map(String.init)
        .filter { !$0.hasPrefix(crashCaseVariable + "=") && !$0.hasPrefix("SWIFT_BACKTRACE=") }
    env.append("\(crashCaseVariable)=\(which.rawValue)")
    env.append("SWIFT_BACKTRACE=enable=no")

    var pipeFDs: [Int32] = [-1, -1]
    guard pipe2(&pipeFDs, O_CLOEXEC) == 0 else { return nil }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 2)

    let cArgs: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
    let cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
    defer {
        cArgs.forEach { free($0) }
        cEnv.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, exe, &actions, nil, cArgs, cEnv)
    close(pipeFDs[1])
    guard rc == 0 else {
        close(pipeFDs[0])
        return nil
    }
    // Read stderr to EOF on a helper thread, with a deadline.
    let readFD = pipeFDs[0]
    let output = onFreshThread(timeout: timeout) { () -> String in
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(readFD, $0.baseAddress, $0.count) }
            if n > 0 { bytes.append(contentsOf: buffer[0..<n]) } else if n < 0 && errno == EINTR { continue } else { break }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    if output == nil { kill(pid, SIGKILL) }  // our own child, by its pid
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if output != nil { close(readFD) }
    let termSignal = status & 0x7F
    if termSignal != 0 && termSignal != 0x7F {
        return ChildOutcome(signal: termSignal, exitCode: nil, stderr: output ?? "<timed out>")
    }
    return ChildOutcome(signal: nil, exitCode: (status >> 8) & 0xFF, stderr: output ?? "<timed out>")
}

@Suite("§2/§3.16 precondition failures name the mistake", .serialized)
struct PreconditionFailureTests {

    @Test("§2 running a loop off its thread, §3.16 a port on a second run loop, §3.25 publishing a proxy: precondition failures naming the mistake",
          arguments: CrashCase.allCases)
    func misuseIsAPreconditionFailureNamingTheMistake(which: CrashCase) throws {
        let outcome = try #require(runCrashChild(which), "could not spawn the child test process")
        let tail = String(outcome.stderr.suffix(1500))
        #expect(outcome.signal == SIGILL || outcome.signal == SIGTRAP,
                "\(which): child was not killed by SIGILL/SIGTRAP (signal \(String(describing: outcome.signal)), exit \(String(describing: outcome.exitCode))); stderr tail:\n\(tail)")
        #expect(outcome.stderr.contains(which.expectedMessage),
                "\(which): stderr does not contain \"\(which.expectedMessage)\"; stderr tail:\n\(tail)")
    }
}

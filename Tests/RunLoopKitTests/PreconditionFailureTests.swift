// The API contract ("Running. Only on the loop's own thread — anything else: precondition
// failure with a message naming the mistake") and §3.16 ("scheduling [a port] on a
// second loop is a precondition failure naming the mistake").
//
// A precondition failure cannot be caught in-process, so each case re-executes this
// test binary (/proc/self/exe) running only `PreconditionCrashEntry`, with
// RUNLOOPKIT_CRASH_CASE naming the misuse to commit. The parent asserts that the
// child died by a signal (SIGILL or SIGTRAP) and that its stderr names the mistake.

import Glibc
import PackageTestSupport
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
    case jobAfterThreadExited
    case isolationCheckedOffThread
    case twoConcurrentConsumers
    case messagesOnProxy
    case closedDescriptorSource
    case publishProxy
    case processExitSourceOnSecondLoop
    case refusingPortsOnProxy
    case nameLimitBelowOne

    var expectedMessage: String {
        switch self {
        case .runModeForFromWrongThread, .runModeBeforeFromWrongThread, .runFromWrongThread, .runUntilFromWrongThread:
            "on its own thread"
        case .portOnSecondRunLoop: "second run loop"
        case .jobAfterThreadExited: "\"crash-gone\", whose thread has exited"
        case .isolationCheckedOffThread: "\"crash-iso\" (its LoopExecutor)"
        case .twoConcurrentConsumers: "one consumer at a time"
        case .messagesOnProxy: "called on a proxy"
        case .closedDescriptorSource: "closed descriptor"
        case .publishProxy: "only a local port can be published"
        case .processExitSourceOnSecondLoop: "ProcessExitSource is already scheduled on the run loop of"
        case .refusingPortsOnProxy: "only the process that owns a port decides what reaches it"
        case .nameLimitBelowOne: "a user must be allowed one connection at least"
        }
    }
}

/// The child side: commits the misuse named in RUNLOOPKIT_CRASH_CASE. Skipped in normal runs.
@Suite("Precondition crash entry (child process only)")
struct PreconditionCrashEntry {
    @Test("child: commit the misuse named by RUNLOOPKIT_CRASH_CASE",
          .enabled(if: environment(crashCaseVariable) != nil))
    func commitMisuse() async throws {
        let which = try #require(environment(crashCaseVariable).flatMap(CrashCase.init(rawValue:)))
        switch which {
        case .jobAfterThreadExited:
            let pinned = PinnedCounter(thread: ResidentThread(name: "crash-gone"))
            pinned.thread.stop()
            await pinned.increment()
            return
        case .isolationCheckedOffThread:
            let pinned = PinnedCounter(thread: ResidentThread(name: "crash-iso"))
            pinned.preconditionIsolated()
            return
        case .twoConcurrentConsumers:
            let messages = try MessagePort().messages()
            let first = Task { for await _ in messages {} }
            try await Task.sleep(for: .milliseconds(200))  // the first consumer is suspended by now
            let second = Task { for await _ in messages {} }
            _ = await (first.value, second.value)
            return
        case .messagesOnProxy:
            let port = try MessagePort()
            _ = try MessagePort(sendRight: port.makeSendRight()).messages()
            return
        case .refusingPortsOnProxy:
            let port = try MessagePort()
            try MessagePort(sendRight: port.makeSendRight()).acceptsPortComponents = false
            return
        case .nameLimitBelowOne:
            _ = MessagePort.NameLimits(connectionsPerUser: 0)
            return
        default:
            break
        }
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
        case .jobAfterThreadExited, .isolationCheckedOffThread, .twoConcurrentConsumers, .messagesOnProxy, .publishProxy,
             .refusingPortsOnProxy, .nameLimitBelowOne:
            break
        case .processExitSourceOnSecondLoop:
            let source = ProcessExitSource(process: try PinnedProcess(pid: getpid())) { _ in }
            let release2 = Flag()
            let second = LoopThread { _ -> Bool in waitUntil(timeout: .seconds(600)) { release2.isSet } }
            loop.add(source, forMode: .default)
            second.loop.add(source, forMode: .default)
            release2.set()
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
        case .closedDescriptorSource:
            let fd = makeEventFD()
            close(fd)
            loop.add(FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in }, forMode: .default)
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

/// Re-executes this test binary with swift-testing, filtered to the crash entry.
func runCrashChild(_ which: CrashCase, timeout: Duration = .seconds(120)) -> ChildOutcome? {
    let exe = "/proc/self/exe"
    // Environment: ours (from /proc/self/environ), plus the case, minus the backtracer.
    var env = (readText("/proc/self/environ") ?? "")
        .split(separator: "\0").map(String.init)
        .filter { !$0.hasPrefix(crashCaseVariable + "=") && !$0.hasPrefix("SWIFT_BACKTRACE=") }
    env.append("\(crashCaseVariable)=\(which.rawValue)")
    env.append("SWIFT_BACKTRACE=enable=no")
    return runChild(exe, ["--testing-library", "swift-testing", "--filter", "PreconditionCrashEntry"],
                    environment: env, capturing: 2, timeout: timeout)
}

@Suite("§2/§3.16 precondition failures name the mistake", .serialized)
struct PreconditionFailureTests {

    @Test("§2 running a loop off its thread or watching a closed descriptor, §3.16 a port on a second run loop, §3.21 a job after its thread exited and isolation checked off the thread, §3.22 two concurrent consumers and messages() on a proxy, §3.25 publishing a proxy, §3.33 a process-exit source on a second loop, §3.34 refusing ports on a proxy, §3.35 a limit below one connection: precondition failures naming the mistake",
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

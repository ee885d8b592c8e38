// Guarantees §3.33: a ProcessExitSource calls its handler exactly once, on its loop's thread and in
// its modes, when the process exits — any process this one may pidfd_open, not only children;
// for a process that has already exited, in the next pass; never after invalidate(). It keeps
// its mode alive until it has fired or is invalidated. Real processes: /bin/sleep, as a child
// and as an orphan of a shell (reparented away from this process).

import Glibc
import RunLoopKit
import Testing

/// A `/bin/sleep 600` child of this process (its caller kills and reaps it).
private func spawnSleeper() throws -> pid_t {
    let words: [String] = ["/bin/sleep", "600"]
    let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, "/bin/sleep", nil, nil, argv, environ)
    try #require(rc == 0, "posix_spawn /bin/sleep: \(String(cString: strerror(rc)))")
    return pid
}

/// Kills and reaps a child of this process, by its pid (it has not been reaped, so the pid is its).
private func killAndReap(_ pid: pid_t) {
    kill(pid, SIGKILL)
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
}

/// A `/bin/sleep 600` that is not a child of this process: a shell starts it in the background
/// and exits, so it is reparented (to init or a subreaper). Pinned while the shell's output says
/// its pid and it cannot have been reaped yet (it sleeps until killed).
private func pinnedOrphan() throws -> PinnedProcess {
    let outcome = try #require(runChild("/bin/sh", ["-c", "/bin/sleep 600 </dev/null >/dev/null 2>&1 & echo $!"]))
    let pid = try #require(outcome.output.split(whereSeparator: \.isWhitespace).first.flatMap { Int32($0) },
                           "\(outcome.output)")
    return try PinnedProcess(pid: pid)
}

@Suite("§3.33 process exit sources")
struct ProcessExitSourceTests {
    @Test("§3.33 the handler runs exactly once, on the loop's thread, when a process that is not a child of this one exits; the source is invalid then and its mode empty")
    func nonChildExit() throws {
        let process = try pinnedOrphan()
        #expect(getppid() != process.pid)
        let calls = Recorder<pid_t>()
        let source = ProcessExitSource(process: process) { fired in
            calls.append(gettid())
            #expect(!fired.isValid)
        }
        source.label = "orphan"
        #expect(source.label == "orphan")
        let loopThread = LoopThread(gated: true) { loop -> RLResult in
            loop.add(source, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        loopThread.go()
        #expect(loopThread.waitUntilSleeping())
        try process.sendSignal(SIGKILL)
        #expect(loopThread.join() == .finished, "the fired source left the mode, which was then empty")
        #expect(calls.values == [loopThread.tid])
        #expect(!source.isValid)
        #expect(!process.isRunning)
    }

    @Test("§3.33 only in its modes: a loop running another mode does not fire it; the next run of its mode does")
    func onlyInItsModes() throws {
        let pid = try spawnSleeper()
        defer { killAndReap(pid) }
        let process = try PinnedProcess(pid: pid)
        let calls = Counter()
        let source = ProcessExitSource(process: process) { _ in calls.increment() }
        let other: RLMode = "other"
        kill(pid, SIGKILL)
        #expect(waitUntil { !process.isRunning })
        let results = onLoopThread { loop -> (RLResult, Int, RLResult, Int) in
            loop.add(source, forMode: .default)
            loop.add(keepAliveSource(), forMode: other)
            let inOther = loop.run(mode: other, for: .zero, returnAfterSourceHandled: false)
            let afterOther = calls.current
            let inDefault = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (inOther, afterOther, inDefault, calls.current)
        }
        #expect(results?.0 == .timedOut)
        #expect(results?.1 == 0, "a mode that does not hold the source never fires it")
        #expect(results?.2 == .handledSource)
        #expect(results?.3 == 1)
    }

    @Test("§3.33 a process that has already exited (a zombie child, not reaped) fires in the next pass")
    func alreadyExited() throws {
        let pid = try spawnSleeper()
        defer { killAndReap(pid) }
        let process = try PinnedProcess(pid: pid)
        kill(pid, SIGKILL)
        #expect(waitUntil { !process.isRunning })
        let calls = Counter()
        let source = ProcessExitSource(process: process) { _ in calls.increment() }
        let result = onLoopThread { loop -> RLResult in
            loop.add(source, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
        }
        #expect(result == .handledSource)
        #expect(calls.current == 1)
    }

    @Test("§3.33 never after invalidate(): before the exit, or by a handler that ran just before it in the same pass")
    func neverAfterInvalidate() throws {
        let pid = try spawnSleeper()
        defer { killAndReap(pid) }
        let process = try PinnedProcess(pid: pid)
        let early = Counter(), late = Counter(), watcher = Counter()
        let invalidatedEarly = ProcessExitSource(process: process) { _ in early.increment() }
        // Two sources on one pidfd become ready in one pass, in ascending order: the first
        // invalidates the second.
        let second = ProcessExitSource(process: process, order: 2) { _ in late.increment() }
        let first = ProcessExitSource(process: process, order: 1) { _ in
            watcher.increment()
            second.invalidate()
        }
        let result = onLoopThread { loop -> RLResult in
            loop.add(invalidatedEarly, forMode: .default)
            loop.add(first, forMode: .default)
            loop.add(second, forMode: .default)
            invalidatedEarly.invalidate()
            kill(pid, SIGKILL)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(result == .finished)
        #expect(watcher.current == 1)
        #expect(early.current == 0)
        #expect(late.current == 0)
        #expect(!second.isValid && !invalidatedEarly.isValid)
    }

    @Test("§3.33 it keeps its mode alive until it has fired or is invalidated; a fired or invalidated source added again does nothing")
    func keepsModeAlive() throws {
        let pid = try spawnSleeper()
        defer { killAndReap(pid) }
        let process = try PinnedProcess(pid: pid)
        let calls = Counter()
        let source = ProcessExitSource(process: process) { _ in calls.increment() }
        let invalidated = ProcessExitSource(process: process) { _ in calls.increment() }
        let results = onLoopThread { loop -> [RLResult] in
            var results: [RLResult] = []
            loop.add(invalidated, forMode: "lonely")
            results.append(loop.run(mode: "lonely", for: .milliseconds(1), returnAfterSourceHandled: false))
            invalidated.invalidate()
            results.append(loop.run(mode: "lonely", for: longRun, returnAfterSourceHandled: false))
            loop.add(source, forMode: .default)
            results.append(loop.run(mode: .default, for: .milliseconds(1), returnAfterSourceHandled: false))
            kill(pid, SIGKILL)
            results.append(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false))
            loop.add(source, forMode: .default)
            loop.add(invalidated, forMode: .default)
            results.append(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false))
            return results
        }
        #expect(results == [.timedOut, .finished, .timedOut, .finished, .finished])
        #expect(calls.current == 1, "exactly once")
    }
}

// LoopHost: a program whose main thread runs `ThreadRunLoop.main`, for the tests of Guarantees §3.20
// (the main loop serves the main dispatch queue, and with it `@MainActor`). The test runner owns
// its own process's main thread, so these scenarios run here, one per invocation:
//
//   dispatch-wakes   the main loop asleep in the default mode; another thread posts a block to
//                    DispatchQueue.main, which wakes the loop and runs on the main thread.
//   main-actor       `Task { @MainActor in }`, `await MainActor.run {}` from a detached task and
//                    DispatchQueue.main all run while the main thread runs `ThreadRunLoop.main`.
//   modes            nothing of the main queue runs while the main loop runs a non-common mode,
//                    or on another thread's loop; it runs once the loop is in a common mode, and
//                    in a mode made common with addCommonMode.
//   readme           the README's example, as written there (ReadmeExample.swift).
//   no-descriptors   the main loop made, then every descriptor taken (as a daemon's clients take
//                    them), then the loop first run: it serves the main queue and does not trap.
//
// Output: "key: value" lines on stdout, checked by the test; exit 0.

#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import RunLoopKit
import Synchronization

func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = write(STDOUT_FILENO, &bytes, bytes.count)
}

/// gettid(2), which the Glibc module does not export.
nonisolated(unsafe) let gettid = unsafeBitCast(dlsym(nil, "gettid"), to: (@convention(c) () -> pid_t).self)

func onMainThread() -> Bool { gettid() == getpid() }

final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// Runs `body` on a new thread once the main loop is asleep in the kernel (10 s at most).
func whenMainLoopSleeps(_ body: @escaping @Sendable () -> Void) {
    Thread.start {
        let deadline = ContinuousClock.now + .seconds(10)
        while !ThreadRunLoop.main.isWaiting && ContinuousClock.now < deadline { usleep(1_000) }
        body()
    }
}

enum Thread {
    static func start(_ body: @escaping @Sendable () -> Void) {
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        var thread = pthread_t()
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        precondition(pthread_create(&thread, nil, { raw in
            Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
            return nil
        }, box) == 0)
        pthread_detach(thread)
    }
}

@MainActor func mainActorIsOnMainThread() -> Bool { onMainThread() }

let loop = ThreadRunLoop.main
let hangGuard = ContinuousClock.now + .seconds(20)

switch CommandLine.arguments.dropFirst().first {
case "dispatch-wakes":
    let ran = Flag()
    whenMainLoopSleeps {
        say("posted while the main loop slept: \(ThreadRunLoop.main.isWaiting)")
        DispatchQueue.main.async {
            say("block on main thread: \(onMainThread())")
            ran.set()
        }
    }
    let result = loop.run(mode: .default, for: .seconds(20), returnAfterSourceHandled: true)
    say("result: \(result)")
    say("block ran: \(ran.isSet)")

case "main-actor":
    Task { @MainActor in
        say("Task @MainActor on main thread: \(mainActorIsOnMainThread())")
    }
    Task.detached {
        let onMain = await MainActor.run { onMainThread() }
        say("MainActor.run on main thread: \(onMain)")
        DispatchQueue.main.async {
            say("DispatchQueue.main on main thread: \(onMainThread())")
            ThreadRunLoop.main.stop()
        }
    }
    loop.run(until: hangGuard)
    say("run returned before the hang guard: \(ContinuousClock.now < hangGuard)")

case "modes":
    let privateMode = ThreadRunLoop.Mode("host.private")
    let keepAlive = RunLoopSource(perform: {})
    loop.add(keepAlive, forMode: privateMode)
    let ran = Flag()
    DispatchQueue.main.async { ran.set() }
    // Gives a loop that wrongly drains the main queue the chance to: a private mode, and another
    // thread's loop running meanwhile.
    let other = ResidentThread(name: "host-other")
    try? other.perform {}
    let privateResult = loop.run(mode: privateMode, for: .milliseconds(300), returnAfterSourceHandled: false)
    say("private mode result: \(privateResult)")
    say("ran in a private mode or on another loop: \(ran.isSet)")
    let defaultResult = loop.run(mode: .default, for: .seconds(20), returnAfterSourceHandled: true)
    say("default mode result: \(defaultResult)")
    say("ran in the default mode: \(ran.isSet)")

    loop.addCommonMode(privateMode)
    let ranAgain = Flag()
    DispatchQueue.main.async { ranAgain.set() }
    let commonResult = loop.run(mode: privateMode, for: .seconds(20), returnAfterSourceHandled: true)
    say("mode made common result: \(commonResult)")
    say("ran in the mode made common: \(ranAgain.isSet)")
    other.stop()

case "readme":
    try runReadmeExample()

case "no-descriptors":
    // The default mode exists before the descriptors run out (a daemon adds its sources at
    // startup); only the loop's first run comes after.
    let keepAlive = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in }
    loop.add(keepAlive, forMode: .default)
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = 64
    setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    var taken: [Int32] = []
    while case let fd = open("/dev/null", O_RDONLY | O_CLOEXEC), fd >= 0 { taken.append(fd) }
    say("descriptors exhausted: \(errno == EMFILE)")
    DispatchQueue.main.async {
        say("block on main thread: \(onMainThread())")
        ThreadRunLoop.main.stop()
    }
    loop.run(until: hangGuard)
    say("run returned before the hang guard: \(ContinuousClock.now < hangGuard)")
    taken.forEach { close($0) }
    keepAlive.invalidate()

default:
    say("unknown scenario")
    exit(2)
}
exit(0)

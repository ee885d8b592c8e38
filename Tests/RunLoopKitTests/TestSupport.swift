// Shared helpers for the behaviour tests. Black-box: only the public API is used.
//
// Conventions:
// - Run loops only run on their own fresh pthread (`LoopThread`, `onLoopThread`).
// - Nothing here blocks the test's own thread without a deadline: a broken
//   implementation makes a test fail, never hang the suite.
// - No timing thresholds. Waits are deadlines of seconds. `settle()` is only
//   used to give a *broken* implementation the chance to misbehave (e.g. a
//   wrong wake-up); a correct implementation passes without it.
// - `#expect` is only called on the test's own thread: loop-thread bodies
//   return what they observed and the test asserts on it.

import Glibc
import PackageTestSupport
import RunLoopKit
import Synchronization

typealias RLMode = ThreadRunLoop.Mode
typealias RLActivity = ThreadRunLoop.Activity
typealias RLResult = ThreadRunLoop.RunResult

/// Generous upper bound for a run that is expected to end for another reason
/// (stop, handled source, finished). If it times out instead, the test fails.
let longRun: Duration = .seconds(20)
/// Hang guard for waiting on a condition: generous, because the suite runs every test at once
/// on a two-thread cooperative pool, so the work a test waits for may queue behind the rest of
/// the suite (tens of seconds under a sanitizer). A passing wait returns as soon as it holds.
let waitLimit: Duration = .seconds(60)

// MARK: - Locking

/// A value guarded by a pthread mutex. Deliberately not `Synchronization.Mutex`:
/// ThreadSanitizer on Linux (Swift 6.3) does not see Mutex's futex-based
/// synchronization and reports false "Swift access race"s inside `withLock`;
/// pthread mutexes are intercepted, so the helpers add no noise to a TSan run.
final class PLocked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value
    init(_ value: Value) {
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        self.value = value
    }
    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

// MARK: - Thread-safe recorders

final class Recorder<T: Sendable>: Sendable {
    private let storage = PLocked<[T]>([])
    init() {}
    func append(_ value: T) { storage.withLock { $0.append(value) } }
    var values: [T] { storage.withLock { $0 } }
    var count: Int { storage.withLock { $0.count } }
    func removeAll() { storage.withLock { $0.removeAll() } }
}

final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    init() {}
    @discardableResult
    func increment() -> Int { value.wrappingAdd(1, ordering: .sequentiallyConsistent).newValue }
    var current: Int { value.load(ordering: .sequentiallyConsistent) }
}

final class Flag: Sendable {
    private let value = Atomic<Bool>(false)
    init() {}
    func set() { value.store(true, ordering: .sequentiallyConsistent) }
    var isSet: Bool { value.load(ordering: .sequentiallyConsistent) }
}

/// A late-bound, lock-protected reference (e.g. to let a callback see the
/// object it was registered with).
final class Ref<T: Sendable>: Sendable {
    private let storage: PLocked<T?>
    init(_ value: T? = nil) { storage = PLocked(value) }
    var value: T? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    func take() -> T? { storage.withLock { v in let r = v; v = nil; return r } }
}

/// Weak reference holder, for checking that an object was deallocated, or for a callback that
/// must see the object it belongs to without keeping it alive (a strong `Ref` would be a cycle).
final class WeakRef<T: AnyObject & Sendable>: Sendable {
    private struct Box: @unchecked Sendable { weak var object: T? }
    private let storage: PLocked<Box>
    init(_ object: T? = nil) { storage = PLocked(Box(object: object)) }
    var object: T? {
        get { storage.withLock { $0.object } }
        set { storage.withLock { $0.object = newValue } }
    }
}

// MARK: - Waiting

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
@discardableResult
func waitUntil(timeout: Duration = waitLimit, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if condition() { return true }
        if ContinuousClock.now >= deadline { return condition() }
        usleep(1_000)
    }
}

/// Gives a broken implementation time to misbehave (e.g. wake up when it
/// must not). A correct implementation never needs it.
func settle() { usleep(200_000) }

/// `waitUntil` for async tests: checks `condition` every millisecond without holding a thread of
/// the cooperative pool, which the tasks under test may need (it has as many threads as cores).
@discardableResult
func eventually(timeout: Duration = waitLimit, _ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if condition() { return true }
        if ContinuousClock.now >= deadline { return condition() }
        try? await Task.sleep(for: .milliseconds(1))
    }
}

/// `settle()` for async tests, without holding a thread of the cooperative pool.
func settleAsync() async { try? await Task.sleep(for: .milliseconds(200)) }

/// Busy-blocks the calling thread (simulates a long callout).
func block(for duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end { usleep(1_000) }
}

// MARK: - Threads

private final class ThreadBody: @unchecked Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
}

/// Starts a detached pthread running `body`.
func startThread(_ body: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(ThreadBody(body)).toOpaque()
    var tid = pthread_t()
    let rc = pthread_create(&tid, nil, { raw in
        Unmanaged<ThreadBody>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, box)
    precondition(rc == 0, "pthread_create failed: \(rc)")
    pthread_detach(tid)
}

/// Runs `body` on a fresh thread and waits (with a deadline) for its result.
/// Returns nil if it did not finish in time (the thread is then leaked).
func onFreshThread<T: Sendable>(timeout: Duration = .seconds(60),
                                _ body: @escaping @Sendable () -> T) -> T? {
    let result = Ref<T>()
    let done = Flag()
    startThread {
        result.value = body()
        done.set()
    }
    guard waitUntil(timeout: timeout, { done.isSet }) else { return nil }
    return result.value
}

/// A fresh pthread with its own `ThreadRunLoop`. The loop is published as
/// `loop` before `init` returns; the body runs right away, or after `go()` if
/// `gated` (so the test can prepare things from outside first).
final class LoopThread<T: Sendable>: Sendable {
    let loop: ThreadRunLoop
    let threadID: pthread_t
    let tid: pid_t
    private let result: Ref<T>
    private let done: Flag
    private let gate: Flag

    init(gated: Bool = false, _ body: @escaping @Sendable (ThreadRunLoop) -> T) {
        let published = Ref<(ThreadRunLoop, pthread_t, pid_t)>()
        let result = Ref<T>(), done = Flag(), gate = Flag()
        self.result = result
        self.done = done
        self.gate = gate
        if !gated { gate.set() }
        startThread {
            let loop = ThreadRunLoop.current
            published.value = (loop, pthread_self(), gettid())
            while !gate.isSet { usleep(500) }
            result.value = body(loop)
            done.set()
        }
        let ok = waitUntil(timeout: .seconds(30)) { published.value != nil }
        precondition(ok, "loop thread did not start")
        let p = published.value!
        loop = p.0
        threadID = p.1
        tid = p.2
    }

    func go() { gate.set() }
    var isFinished: Bool { done.isSet }

    /// Waits for the body to finish; nil if it did not within `timeout`.
    func join(timeout: Duration = .seconds(60)) -> T? {
        guard waitUntil(timeout: timeout, { done.isSet }) else { return nil }
        return result.value
    }

    /// Waits until the loop is blocked in the kernel (optionally in `mode`).
    @discardableResult
    func waitUntilSleeping(in mode: RLMode? = nil, timeout: Duration = waitLimit) -> Bool {
        waitUntil(timeout: timeout) {
            loop.isWaiting && (mode == nil || loop.currentMode == mode)
        }
    }
}

/// Runs `body` with the loop of a fresh thread, on that thread.
func onLoopThread<T: Sendable>(timeout: Duration = .seconds(60),
                               _ body: @escaping @Sendable (ThreadRunLoop) -> T) -> T? {
    LoopThread(body).join(timeout: timeout)
}

func isCurrentThread(_ thread: pthread_t) -> Bool { pthread_equal(pthread_self(), thread) != 0 }

// MARK: - Observers and items

func activityName(_ a: RLActivity) -> String {
    var names: [String] = []
    if a.contains(.entry) { names.append("entry") }
    if a.contains(.beforeTimers) { names.append("beforeTimers") }
    if a.contains(.beforeSources) { names.append("beforeSources") }
    if a.contains(.beforeWaiting) { names.append("beforeWaiting") }
    if a.contains(.afterWaiting) { names.append("afterWaiting") }
    if a.contains(.exit) { names.append("exit") }
    return names.joined(separator: "|")
}

/// An observer that appends the activity name (optionally prefixed) to `events`.
func recordingObserver(_ events: Recorder<String>, activities: RLActivity = .allActivities,
                       order: Int = 0, prefix: String = "") -> RunLoopObserver {
    RunLoopObserver(activities: activities, order: order) { _, activity in
        events.append(prefix + activityName(activity))
    }
}

/// A Source0 that is never signalled: keeps a mode non-empty.
func keepAliveSource() -> RunLoopSource { RunLoopSource(perform: {}) }

/// A timer far in the future: keeps a mode non-empty.
func farFutureTimer() -> RunLoopTimer { RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in } }

// MARK: - libc entry points Swift's Glibc module does not export

private func libcSymbol<F>(_ name: String, as type: F.Type) -> F {
    guard let sym = dlsym(nil, name) else { fatalError("dlsym(\(name)) failed") }
    return unsafeBitCast(sym, to: type)
}

private nonisolated(unsafe) let libcEventfd = libcSymbol(
    "eventfd", as: (@convention(c) (UInt32, Int32) -> Int32).self)
private nonisolated(unsafe) let libcGettid = libcSymbol(
    "gettid", as: (@convention(c) () -> pid_t).self)

private nonisolated(unsafe) let libcPipe2 = libcSymbol(
    "pipe2", as: (@convention(c) (UnsafeMutablePointer<Int32>, Int32) -> Int32).self)

/// pipe2(2): a pipe whose ends get `flags` (e.g. O_CLOEXEC) atomically.
func pipe2(_ fds: inout [Int32], _ flags: Int32) -> Int32 {
    precondition(fds.count == 2)
    return fds.withUnsafeMutableBufferPointer { libcPipe2($0.baseAddress!, flags) }
}

/// The kernel thread id of the calling thread.
func gettid() -> pid_t { libcGettid() }

// MARK: - File descriptors

/// A non-blocking eventfd (counter 0).
func makeEventFD() -> Int32 {
    let fd = libcEventfd(0, O_NONBLOCK | O_CLOEXEC)  // EFD_NONBLOCK == O_NONBLOCK, EFD_CLOEXEC == O_CLOEXEC
    precondition(fd >= 0, "eventfd failed: \(errno)")
    return fd
}

func writeEventFD(_ fd: Int32, _ value: UInt64 = 1) {
    var v = value
    let n = write(fd, &v, 8)
    precondition(n == 8, "eventfd write failed: \(errno)")
}

/// Reads (and so clears) an eventfd; returns its counter, 0 if it was not readable.
@discardableResult
func drainEventFD(_ fd: Int32) -> UInt64 {
    var v: UInt64 = 0
    let n = read(fd, &v, 8)
    return n == 8 ? v : 0
}

func isOpenDescriptor(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

// MARK: - /proc

/// (tid, comm) of every thread of this process.
func processThreads() -> [(tid: pid_t, name: String)] {
    guard let dir = opendir("/proc/self/task") else { return [] }
    defer { closedir(dir) }
    var out: [(pid_t, String)] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
        }
        guard let tid = pid_t(name) else { continue }
        let comm = readText("/proc/self/task/\(tid)/comm") ?? ""
        out.append((tid, comm.hasSuffix("\n") ? String(comm.dropLast()) : comm))
    }
    return out
}

func threadExists(_ tid: pid_t) -> Bool { access("/proc/self/task/\(tid)", F_OK) == 0 }

/// A short (comm-sized, < 16 bytes) name unique within this process run.
func uniqueThreadName(_ prefix: String) -> String {
    let n = nameCounter.wrappingAdd(1, ordering: .relaxed).newValue
    return "\(prefix)\(getpid() % 1000)-\(n)"
}
private let nameCounter = Atomic<Int>(0)

// MARK: - CPU time

/// CPU time (user + system) consumed so far by the calling thread.
func threadCPUTime() -> Duration {
    var usage = rusage()
    let rc = getrusage(__rusage_who_t(1) /* RUSAGE_THREAD */, &usage)
    precondition(rc == 0)
    func d(_ t: timeval) -> Duration { .seconds(Int64(t.tv_sec)) + .microseconds(Int64(t.tv_usec)) }
    return d(usage.ru_utime) + d(usage.ru_stime)
}

// MARK: - Child processes

/// Result of a child run.
struct ChildOutcome: Sendable {
    var signal: Int32?      // terminating signal, if killed by one
    var exitCode: Int32?    // exit status, if it exited
    /// What the child wrote to the captured descriptor.
    var output: String
    var stderr: String { output }
}

/// Runs `executable` with `arguments`, capturing what it writes to descriptor `capturing` (1 or
/// 2; the other goes to /dev/null), and waits for it to exit. A child still running after
/// `timeout` is killed and its output reads "<timed out>". Nil if it could not be spawned.
func runChild(_ executable: String, _ arguments: [String], environment: [String]? = nil,
              capturing: Int32 = 1, timeout: Duration = .seconds(120)) -> ChildOutcome? {
    let env = environment ?? (readText("/proc/self/environ") ?? "").split(separator: "\0").map(String.init)
    var pipeFDs: [Int32] = [-1, -1]
    guard pipe2(&pipeFDs, O_CLOEXEC) == 0 else { return nil }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, capturing == 1 ? 2 : 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], capturing)

    let cArgs: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    let cEnv: [UnsafeMutablePointer<CChar>?] = env.map { strdup($0) } + [nil]
    defer {
        cArgs.forEach { free($0) }
        cEnv.forEach { free($0) }
    }
    var pid: pid_t = 0
    let rc = posix_spawn(&pid, executable, &actions, nil, cArgs, cEnv)
    close(pipeFDs[1])
    guard rc == 0 else {
        close(pipeFDs[0])
        return nil
    }
    // Read the output to EOF on a helper thread, with a deadline.
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
        return ChildOutcome(signal: termSignal, exitCode: nil, output: output ?? "<timed out>")
    }
    return ChildOutcome(signal: nil, exitCode: (status >> 8) & 0xFF, output: output ?? "<timed out>")
}

// MARK: - Environment

func environment(_ name: String) -> String? {
    guard let v = getenv(name) else { return nil }
    return String(cString: v)
}

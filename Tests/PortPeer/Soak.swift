// PortPeer's chaos soak: everything at once, with exact accounting at the end.
//
//   soak <seconds>                  8 worker threads create, schedule and invalidate ports and
//                                   send to them; resident threads are started and stopped; timers
//                                   and observers are added and removed; 4 child processes stream
//                                   to one port, two over send rights and two through its
//                                   published name, SIGKILLed at random and restarted. Prints
//                                   "soak ok: …" with the counts, or fails naming what broke.
//   soak-stream <incarnation> <fd>  sends msgid 0, 1, 2, … with DATA <incarnation> through the send
//                                   right at <fd> until killed (exits 0 once the port is gone).
//   soak-stream-name <incarnation> <name>   the same through a connection to <name>.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit
import Synchronization

// MARK: - Children

func soakStream() -> Never {
    guard let incarnation = UInt32(argument(2)) else { fail("soak-stream <incarnation> <fd | name>") }
    let port: MessagePort
    if modeArguments[1] == "soak-stream-name" {
        do { port = try MessagePort.connect(to: argument(3)) } catch { exit(0) }
    } else {
        port = proxy(descriptorArgument(3))
    }
    let tag = withUnsafeBytes(of: incarnation.littleEndian) { Data($0) }
    var msgid: UInt32 = 0
    while true {
        // The soak invalidates its port at the end: nothing more to send, and nothing lost.
        do { try port.send(msgid: msgid, components: [.data(tag)], timeout: .seconds(30)) } catch { exit(0) }
        msgid &+= 1
    }
}

// MARK: - The soak

/// What one worker is doing, for the watchdog to name when it stops making progress.
final class Progress: Sendable {
    private let state: Locked<(step: String, at: ContinuousClock.Instant)>
    init() { state = Locked(("starting", .now)) }
    func step(_ text: String) { state.withLock { $0 = (text, .now) } }
    var last: (step: String, at: ContinuousClock.Instant) { state.withLock { $0 } }
}

/// In-process counts, summed over every port the workers made.
struct InProcessTally: Sendable {
    var ports = 0
    var sent: UInt64 = 0
    var refused = 0
    var delivered: UInt64 = 0
    var discarded: UInt64 = 0
}

private func residentBytes() -> Int {
    guard let text = readText("/proc/self/statm") else { return 0 }
    let fields = text.split(separator: " ")
    return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
}

private func readText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let count = read(fd, &buffer, buffer.count)
    return count > 0 ? String(decoding: buffer[0..<count], as: UTF8.self) : nil
}

func soak() -> Never {
    guard let seconds = Int(argument(2)), seconds > 0 else { fail("soak <seconds>") }
    let descriptorsAtStart = openDescriptorCount()
    let tableAtStart = descriptorTable()
    let problems = Box<[String]>([])
    let problem: @Sendable (String) -> Void = { text in problems.update { if $0.count < 20 { $0.append(text) } } }

    // Cross-process: one port on its own resident thread, published and handed out as send rights.
    var crossThread: ResidentThread? = ResidentThread(name: "soak-cross")
    var cross: MessagePort! = makeLocalPort(256)
    /// Per child incarnation: the next msgid expected, and the pid the kernel reported.
    let streams = Box<[UInt32: (next: UInt32, pid: Int32)]>([:])
    cross.setHandler { message in
        guard let data = message.data, data.count == 4, let sender = message.sender else {
            problem("cross: a message without a 4-byte tag or a kernel-verified sender: \(message)")
            return
        }
        let incarnation = data.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(as: UInt32.self)) }
        streams.update { table in
            let expected = table[incarnation]?.next ?? 0
            if message.msgid != expected {
                problem("cross: incarnation \(incarnation) sent msgid \(message.msgid), expected \(expected) (lost, duplicated or reordered)")
            }
            table[incarnation] = (message.msgid &+ 1, sender.pid)
        }
    }
    crossThread!.runLoop.add(cross, forMode: .default)
    let name = "rlk-soak-\(getpid())"
    do { try cross.publish(as: name, access: .sameUser) } catch { fail("publish: \(error)") }

    let deadline = ContinuousClock.now + .seconds(seconds)
    let stopping = Atomic<Bool>(false)

    // Resident threads the workers schedule ports, timers and observers on.
    let pool = Box<[ResidentThread]>((0..<3).map { ResidentThread(name: "soak-pool-\($0)") })
    let tally = Box(InProcessTally())
    let workers = 8
    let progress = (0..<workers + 1).map { _ in Progress() }
    let finished = Atomic<Int>(0)

    for worker in 0..<workers {
        let me = progress[worker]
        startThread {
            var random = SystemRandomNumberGenerator()
            while !stopping.load(ordering: .relaxed) {
                switch Int.random(in: 0..<10, using: &random) {
                case 0..<6: soakPortCycle(worker: worker, pool: pool, tally: tally, progress: me, stopping: stopping,
                                          problem: problem, random: &random)
                case 6..<8: soakItemsCycle(pool: pool, progress: me, random: &random)
                default: soakThreadChurn(pool: pool, progress: me, random: &random)
                }
            }
            me.step("done")
            finished.add(1, ordering: .sequentiallyConsistent)
        }
    }

    // The children: slots 0 and 1 over send rights, 2 and 3 through the name.
    let childProgress = progress[workers]
    let childCounts = Box<(spawned: Int, killed: Int)>((0, 0))
    let rightsSource: MessagePort = cross
    let childrenDone = Atomic<Bool>(false)
    startThread {
        var random = SystemRandomNumberGenerator()
        var running: [pid_t?] = [nil, nil, nil, nil]
        var incarnation: UInt32 = 0
        let executable = ownExecutable()
        while !stopping.load(ordering: .relaxed) {
            for slot in running.indices where running[slot] == nil {
                incarnation += 1
                childProgress.step("spawning child \(incarnation) in slot \(slot)")
                if slot < 2 {
                    let right: Int32
                    do { right = try rightsSource.makeSendRight() } catch { problem("makeSendRight: \(error)"); continue }
                    running[slot] = spawn(executable, ["soak-stream", String(incarnation), "3"], inherit: [(right, 3)])
                    close(right)
                } else {
                    running[slot] = spawn(executable, ["soak-stream-name", String(incarnation), name], inherit: [])
                }
                childCounts.update { $0.spawned += 1 }
            }
            childProgress.step("letting the children stream")
            usleep(UInt32.random(in: 20_000...200_000, using: &random))
            let victim = Int.random(in: 0..<running.count, using: &random)
            if let pid = running[victim] {
                childProgress.step("SIGKILL of child pid \(pid)")
                kill(pid, SIGKILL)
                var status: Int32 = 0
                waitpid(pid, &status, 0)
                running[victim] = nil
                childCounts.update { $0.killed += 1 }
            }
        }
        for case let pid? in running {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            waitpid(pid, &status, 0)
        }
        childProgress.step("done")
        childrenDone.store(true, ordering: .sequentiallyConsistent)
    }

    // The watchdog: a step that does not move for 30 s names the stuck thread. Memory is measured
    // from a point where every kind of work has run (thread stacks and allocator arenas exist).
    var rssAtStart: Int?
    let warmedUp = ContinuousClock.now + .seconds(seconds) / 5
    while ContinuousClock.now < deadline {
        if rssAtStart == nil && ContinuousClock.now >= warmedUp { rssAtStart = residentBytes() }
        usleep(500_000)
        for (index, worker) in progress.enumerated() {
            let (step, at) = worker.last
            if step != "done", ContinuousClock.now - at > .seconds(30) {
                fail("watchdog: \(index < workers ? "worker \(index)" : "the child spawner") stuck for 30 s at: \(step)")
            }
        }
    }
    stopping.store(true, ordering: .sequentiallyConsistent)
    let stopDeadline = ContinuousClock.now + .seconds(60)
    while finished.load(ordering: .sequentiallyConsistent) < workers || !childrenDone.load(ordering: .sequentiallyConsistent) {
        guard ContinuousClock.now < stopDeadline else {
            let stuck = progress.enumerated().filter { $0.element.last.step != "done" }.map { "\($0.offset): \($0.element.last.step)" }
            fail("watchdog: not finished 60 s after the end: \(stuck.joined(separator: "; "))")
        }
        usleep(20_000)
    }

    // Every child is dead: the frames they wrote are all in the sockets; let the loop read them.
    guard waitUntil(.seconds(30), { cross.connectionCount == 0 && cross.queuedCount == 0 }) else {
        fail("the cross-process port kept \(cross.connectionCount) connections and \(cross.queuedCount) messages")
    }
    let crossStatistics = cross.statistics
    cross.invalidate()
    crossThread?.stop()
    crossThread = nil
    stopAndRelease(pool)

    let streamTable = streams.value
    let crossDelivered = streamTable.values.reduce(UInt64(0)) { $0 + UInt64($1.next) }
    if crossDelivered != crossStatistics.delivered {
        problem("cross: the handler saw \(crossDelivered) messages, the port delivered \(crossStatistics.delivered)")
    }
    if crossStatistics.sent != crossStatistics.delivered {
        problem("cross: \(crossStatistics.sent) accepted, \(crossStatistics.delivered) delivered")
    }
    let counts = tally.value
    if counts.sent != counts.delivered + counts.discarded {
        problem("in-process: \(counts.sent) sent ≠ \(counts.delivered) delivered + \(counts.discarded) discarded")
    }
    // Descriptors: threads, ports and children are gone; what they held is closed.
    cross = nil
    if !waitUntil(.seconds(10), { openDescriptorCount() == descriptorsAtStart }) {
        let left = descriptorTable().filter { !tableAtStart.keys.contains($0.key) }
        problem("descriptors: \(descriptorsAtStart) at the start, \(openDescriptorCount()) at the end: \(left)")
    }
    let rssGrowth = residentBytes() - (rssAtStart ?? residentBytes())
    // A sanitizer's shadow memory and quarantine grow with the work done, whatever the code does.
    let underSanitizer = getenv("RUNLOOPKIT_SANITIZER") != nil
    if rssGrowth > 8 << 20 && !underSanitizer { problem("RSS grew by \(rssGrowth >> 10) KiB (limit 8 MiB)") }

    let found = problems.value
    guard found.isEmpty else { fail("soak: " + found.joined(separator: "\n  ")) }
    let children = childCounts.value
    say("soak ok: \(seconds) s; in-process: \(counts.ports) ports, \(counts.sent) sent, \(counts.delivered) delivered, "
        + "\(counts.discarded) discarded, \(counts.refused) refused with a typed error; cross-process: "
        + "\(crossDelivered) messages in order from \(streamTable.count) of \(children.spawned) child processes "
        + "(\(children.killed) SIGKILLed); descriptors \(descriptorsAtStart) → \(openDescriptorCount()); "
        + "RSS \(rssGrowth >= 0 ? "+" : "")\(rssGrowth >> 10) KiB\(underSanitizer ? " (not checked under a sanitizer)" : "")")
    exit(0)
}

/// Starts a detached thread running `body`.
private func startThread(_ body: @escaping @Sendable () -> Void) {
    final class Body { let run: @Sendable () -> Void; init(_ run: @escaping @Sendable () -> Void) { self.run = run } }
    var thread = pthread_t()
    let box = Unmanaged.passRetained(Body(body)).toOpaque()
    let result = pthread_create(&thread, nil, { raw in
        Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue().run()
        return nil
    }, box)
    guard result == 0 else { fail("pthread_create: \(result)") }
    pthread_detach(thread)
}

/// A thread of the pool, or nil when the churn emptied it for a moment.
private func anyThread(_ pool: Box<[ResidentThread]>, _ random: inout SystemRandomNumberGenerator) -> ResidentThread? {
    pool.value.randomElement(using: &random)
}

/// One port: scheduled on a pool thread (which may be stopped meanwhile), sent to from this
/// worker, sometimes invalidated while sends go on; then every message is accounted for.
private func soakPortCycle(worker: Int, pool: Box<[ResidentThread]>, tally: Box<InProcessTally>, progress: Progress,
                           stopping: borrowing Atomic<Bool>,
                           problem: @escaping @Sendable (String) -> Void, random: inout SystemRandomNumberGenerator) {
    guard let thread = anyThread(pool, &random) else { return }
    progress.step("making a port")
    let port = makeLocalPort(Int.random(in: 1...64, using: &random))
    let handled = Box<(count: UInt64, next: UInt32)>((0, 0))
    port.setHandler { message in
        handled.update { seen in
            if message.msgid != seen.next { problem("worker \(worker): port delivered msgid \(message.msgid), expected \(seen.next)") }
            seen = (seen.count + 1, message.msgid &+ 1)
        }
    }
    thread.runLoop.add(port, forMode: Bool.random(using: &random) ? .default : .common)
    let count = Int.random(in: 1...300, using: &random)
    let invalidateAt = Bool.random(using: &random) ? Int.random(in: 0..<count, using: &random) : -1
    var sent: UInt64 = 0, refused = 0
    for index in 0..<count where !stopping.load(ordering: .relaxed) {
        if index == invalidateAt { port.invalidate() }
        progress.step("sending message \(index) of \(count) to a port on \(thread.name)")
        do {
            try port.send(msgid: UInt32(sent), timeout: .milliseconds(200))
            sent += 1
        } catch .invalidPort {
            refused += 1
        } catch .timedOut {
            // The queue stayed full (its thread was stopped, or is slow): the rest would be
            // refused the same way, 200 ms each.
            refused += 1
            break
        } catch {
            problem("worker \(worker): send threw \(error)")
        }
    }
    progress.step("invalidating a port")
    port.invalidate()
    progress.step("accounting for a port")
    let settled = waitUntil(.seconds(20)) {
        let statistics = port.statistics
        return statistics.delivered + statistics.discarded == sent && handled.value.count == statistics.delivered
    }
    let statistics = port.statistics
    if !settled || statistics.sent != sent {
        problem("worker \(worker): \(sent) sent, the port counted \(statistics), the handler saw \(handled.value.count)")
    }
    tally.update {
        $0.ports += 1
        $0.sent += sent
        $0.refused += refused
        $0.delivered += statistics.delivered
        $0.discarded += statistics.discarded
    }
}

/// Timers and observers added to a pool thread's loop, left to fire, then removed.
private func soakItemsCycle(pool: Box<[ResidentThread]>, progress: Progress, random: inout SystemRandomNumberGenerator) {
    guard let thread = anyThread(pool, &random) else { return }
    progress.step("adding timers and observers on \(thread.name)")
    let timers = (0..<Int.random(in: 1...20, using: &random)).map { _ in
        RunLoopTimer(fireAt: .now + .milliseconds(Int64.random(in: 0...20, using: &random)),
                     interval: .milliseconds(Int64.random(in: 0...5, using: &random))) { _ in }
    }
    let observer = RunLoopObserver(activities: .allActivities, order: Int.random(in: -5...5, using: &random)) { _, _ in }
    for timer in timers { thread.runLoop.add(timer, forMode: .default) }
    thread.runLoop.add(observer, forMode: .common)
    usleep(UInt32.random(in: 1_000...20_000, using: &random))
    progress.step("removing timers and observers from \(thread.name)")
    for timer in timers {
        if Bool.random(using: &random) { timer.invalidate() } else { thread.runLoop.remove(timer, forMode: .default) }
    }
    observer.invalidate()
}

/// A resident thread started, or one stopped (the pool keeps between one and six).
private func soakThreadChurn(pool: Box<[ResidentThread]>, progress: Progress, random: inout SystemRandomNumberGenerator) {
    if Bool.random(using: &random) {
        progress.step("starting a resident thread")
        let thread = ResidentThread(name: "soak-churn")
        let keep: Bool = pool.value.count < 6
        if keep { pool.update { $0.append(thread) } } else { thread.stop() }
    } else {
        var stopped: ResidentThread?
        pool.update { threads in
            guard threads.count > 1 else { return }
            stopped = threads.remove(at: Int.random(in: 0..<threads.count, using: &random))
        }
        if let stopped {
            progress.step("stopping resident thread \(stopped.name)")
            stopped.stop()
        }
    }
}


/// Stops the pool's threads and lets them go. A function of its own, so that no iterator or
/// copy of the array outlives it (a debug build keeps a for-in's array to the end of the
/// enclosing scope, which would keep the threads' loops, and their descriptors, alive).
@inline(never)
private func stopAndRelease(_ pool: Box<[ResidentThread]>) {
    for thread in pool.value { thread.stop() }
    pool.value = []
}

import CBenchmarkPeers
import Foundation
import RunLoopKit

/// The `churn` workload: N items — Source0s, far-future timers and one MessagePort in eight —
/// added to one mode of a loop, then removed, each in its own random order, by 1 thread or by
/// 8 threads at once (each with its share). It measures what scheduling and cancelling cost
/// at scale: a daemon holding 100,000 timers must add and remove the next one as cheaply as
/// one holding 1,000 (CF keeps a mode's items in hashed sets for that reason).
///
/// The loop is the child's main thread's, which does not run during a window, so what is
/// timed is the add/remove bookkeeping (and each port's epoll_ctl), not passes of the loop.
/// After every window the main thread runs the mode once and fails unless it is empty.
/// Main thread only; the worker threads are started per window.
enum Churn {
    private static let mode = ThreadRunLoop.Mode("churn")

    static func measure(_ plan: ChurnPlan) -> ChurnMeasurement {
        let loop = ThreadRunLoop.current
        let items = ChurnItems(count: plan.sizes.max() ?? 0)
        var generator = SplitMix64(seed: 18)
        var points: [ChurnPoint] = []
        var operations = 0
        let allocationsBegin = bench_alloc_snapshot()
        for size in plan.sizes {
            for threads in plan.threadCounts {
                let orders = (0..<threads).map { thread in
                    let share = Array(stride(from: thread, to: size, by: threads))
                    return (adds: share.shuffled(using: &generator), removes: share.shuffled(using: &generator))
                }
                let repetitions = max(1, plan.operationsPerWindow / (2 * size))
                var samples: [Double] = []
                let pointStart = ContinuousClock.now
                while samples.count < plan.minimumWindows || ContinuousClock.now - pointStart < plan.budget {
                    let elapsed = window(items, orders, repetitions: repetitions, loop: loop)
                    guard loop.run(mode: mode, for: .zero, returnAfterSourceHandled: false) == .finished else {
                        fail("churn: items were left in the mode after \(threads) threads removed all \(size)")
                    }
                    samples.append(Double(elapsed) / Double(2 * size * repetitions))
                    operations += 2 * size * repetitions
                }
                samples.sort()
                points.append(ChurnPoint(items: size, threads: threads, nanosecondsPerOperation: samples[samples.count / 2]))
            }
        }
        let allocations = AllocationWindow(begin: allocationsBegin, end: bench_alloc_snapshot())
        let counted = [plan.sizes.min(), plan.sizes.max()].compactMap { $0 }
        for (size, instructions) in instructionsPerOperation(sizes: counted, plan: plan) {
            guard let index = points.firstIndex(where: { $0.items == size && $0.threads == 1 }) else { continue }
            points[index].instructionsPerOperation = instructions
        }
        return ChurnMeasurement(points: points, operations: operations, allocations: allocations)
    }

    /// Callgrind's instructions per add or remove at each of `sizes` items, one thread: this
    /// executable run again under `valgrind --tool=callgrind` with collection off, which counts
    /// one window (`countInstructions`). Empty when valgrind is not installed.
    private static func instructionsPerOperation(sizes: [Int], plan: ChurnPlan) -> [(size: Int, instructions: Double)] {
        guard let valgrind = ["/usr/bin/valgrind", "/usr/local/bin/valgrind"].first(where: {
            FileManager.default.isExecutableFile(atPath: $0)
        }) else { return [] }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        // One copy for every size: it is the whole executable.
        let counted = withoutDebugInfo(executable)
        defer { if counted != executable { try? FileManager.default.removeItem(atPath: counted) } }
        return sizes.map { size in
            let output = FileManager.default.temporaryDirectory.appendingPathComponent("churn-\(getpid())-\(size).callgrind")
            defer { try? FileManager.default.removeItem(at: output) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: valgrind)
            process.arguments = ["--tool=callgrind", "--collect-atstart=no", "--callgrind-out-file=\(output.path)",
                                 counted, "--churn-instructions", "\(size)"]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            do { try process.run() } catch { fail("churn: cannot start valgrind: \(error)") }
            process.waitUntilExit()
            guard process.terminationStatus == 0, let text = try? String(contentsOf: output, encoding: .utf8),
                  let totals = text.split(separator: "\n").first(where: { $0.hasPrefix("totals:") || $0.hasPrefix("summary:") }),
                  let instructions = totals.split(separator: " ").last.flatMap({ Double($0) }) else {
                fail("churn: callgrind did not count the \(size)-item window (exit \(process.terminationStatus))")
            }
            return (size, instructions / Double(operations(size: size, plan: plan)))
        }
    }

    /// A copy of `executable` without its DWARF sections, or `executable` itself when no objcopy
    /// can make one. Valgrind 3.19 (Debian 12's) gives up on the DWARF 5 forms Swift 6.3 writes
    /// ("unhandled dwarf2 abbrev form code 0x25 … I can't recover"), and callgrind counts
    /// instructions, for which the symbol table, which the copy keeps, is enough.
    private static func withoutDebugInfo(_ executable: String) -> String {
        // binutils' objcopy, or the LLVM one every Swift toolchain ships.
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        let candidates = ["objcopy", "llvm-objcopy"].flatMap { tool in path.split(separator: ":").map { "\($0)/\(tool)" } }
        guard let objcopy = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            return executable
        }
        let copy = FileManager.default.temporaryDirectory.appendingPathComponent("churn-\(getpid())-Benchmarks").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: objcopy)
        process.arguments = ["--strip-debug", executable, copy]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return executable }
        process.waitUntilExit()
        return process.terminationStatus == 0 ? copy : executable
    }

    /// Adds and removes in one window of `size` items (the same count at every size).
    private static func operations(size: Int, plan: ChurnPlan) -> Int {
        2 * size * max(1, plan.operationsPerWindow / (2 * size))
    }

    /// The process `instructionsPerOperation` runs under callgrind: one untimed window to bring
    /// the mode's storage to its size, then one window with collection on, on this thread.
    static func countInstructions(size: Int, plan: ChurnPlan) {
        let loop = ThreadRunLoop.current
        let items = ChurnItems(count: size)
        var generator = SplitMix64(seed: 18)
        let adds = Array(0..<size).shuffled(using: &generator)
        let removes = Array(0..<size).shuffled(using: &generator)
        let repetitions = operations(size: size, plan: plan) / (2 * size)
        for collecting in [false, true] {
            if collecting { bench_callgrind_toggle_collect() }
            for _ in 0..<repetitions {
                for index in adds { items.add(index, to: loop, mode: mode) }
                for index in removes { items.remove(index, from: loop, mode: mode) }
            }
            if collecting { bench_callgrind_toggle_collect() }
        }
        guard loop.run(mode: mode, for: .zero, returnAfterSourceHandled: false) == .finished else {
            fail("churn: items were left in the mode after removing all \(size)")
        }
    }

    /// One timed window: each thread adds its share then removes it, `repetitions` times.
    /// Returns nanoseconds from releasing the (already started) threads to the last one done.
    private static func window(_ items: ChurnItems, _ orders: [(adds: [Int], removes: [Int])],
                               repetitions: Int, loop: ThreadRunLoop) -> UInt64 {
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let done = DispatchGroup()
        for order in orders {
            done.enter()
            Thread.detachNewThread {
                ready.signal()
                go.wait()
                for _ in 0..<repetitions {
                    for index in order.adds { items.add(index, to: loop, mode: mode) }
                    for index in order.removes { items.remove(index, from: loop, mode: mode) }
                }
                done.leave()
            }
        }
        for _ in orders { ready.wait() }
        let start = bench_now_ns()
        for _ in orders { go.signal() }
        done.wait()
        return bench_now_ns() - start
    }
}

/// The items of the churn workload, created once (outside the timed windows) and reused by
/// every point: item `i` is a MessagePort when `i % 8 == 7` (each holds an eventfd, and the
/// process has 20,000 descriptors at most on these VMs), else a timer when `i` is odd, else a
/// Source0 with one of four orders. Read-only once built, so any thread may use it.
final class ChurnItems: Sendable {
    private enum Item {
        case source(RunLoopSource)
        case timer(RunLoopTimer)
        case port(MessagePort)
    }
    private let items: [Item]

    init(count: Int) {
        items = (0..<count).map { index in
            if index % 8 == 7 { return .port(RunLoopKitPeer.makePort()) }
            if index % 2 == 1 { return .timer(RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in }) }
            return .source(RunLoopSource(order: index % 4, perform: {}))
        }
    }

    func add(_ index: Int, to loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {
        switch items[index] {
        case .source(let source): loop.add(source, forMode: mode)
        case .timer(let timer): loop.add(timer, forMode: mode)
        case .port(let port): loop.add(port, forMode: mode)
        }
    }

    func remove(_ index: Int, from loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {
        switch items[index] {
        case .source(let source): loop.remove(source, forMode: mode)
        case .timer(let timer): loop.remove(timer, forMode: mode)
        case .port(let port): loop.remove(port, forMode: mode)
        }
    }
}

/// A small seeded generator, so that every run shuffles the same way.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

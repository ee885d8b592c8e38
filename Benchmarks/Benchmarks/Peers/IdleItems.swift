import CBenchmarkPeers
import Foundation
import RunLoopKit

/// The `idle` workload's load: items that sit in a loop's mode and never fire — ports nobody
/// sends to, timers due in a day and descriptor sources on eventfds nobody writes. Every
/// handler fails the run, so an item that fired by mistake cannot go unnoticed. A pass that
/// costs in proportion to its items shows up as a slower round trip than the row with one idle
/// fd source, and as a slower one again with ten times the items.
final class IdleItems: Sendable {
    /// How many items of each kind.
    struct Load: Sendable {
        var ports: Int
        var timers: Int
        var descriptorSources: Int

        /// The `idle` row: 1,000 ports, 1,000 timers, 100 fd sources (the C eventfd + epoll
        /// reference holds as many idle eventfds in each thread's epoll set).
        static let standard = Load(ports: 1_000, timers: 1_000, descriptorSources: Int(BENCH_IDLE_DESCRIPTORS))
        /// The floor the idle bar reads against: one idle fd source, which makes the loop sleep in
        /// epoll as the standard load does, and nothing else.
        static let oneSource = Load(ports: 0, timers: 0, descriptorSources: 1)
        /// Ten times the standard load: the flatness bar.
        static let tenfold = Load(ports: 10_000, timers: 10_000, descriptorSources: 10 * Int(BENCH_IDLE_DESCRIPTORS))

        /// "1,000 ports, 1,000 timers, 100 fd sources", for names of rows and bars.
        var summary: String {
            "\(ports.formatted()) ports, \(timers.formatted()) timers, \(descriptorSources.formatted()) fd sources"
        }
    }

    private let portItems: [MessagePort]
    private let timerItems: [RunLoopTimer]
    private let sourceItems: [FileDescriptorSource]
    private let descriptors: [Int32]

    /// Creates the items and adds them to `loop`'s default mode (from any thread).
    init(_ load: Load, on loop: ThreadRunLoop) {
        raiseDescriptorLimit(to: 2 * load.descriptorSources + 1_024)
        portItems = (0..<load.ports).map { _ in
            let port = RunLoopKitPeer.makePort()
            port.setHandler { _ in fail("RunLoopKit: an idle port received a message") }
            return port
        }
        let farFuture = ContinuousClock.now.advanced(by: .seconds(86_400))
        timerItems = (0..<load.timers).map { index in
            RunLoopTimer(fireAt: farFuture.advanced(by: .milliseconds(index))) { _ in
                fail("RunLoopKit: an idle timer fired")
            }
        }
        descriptors = (0..<load.descriptorSources).map { _ in
            let descriptor = bench_event_new()
            if descriptor < 0 { fail("eventfd failed") }
            return descriptor
        }
        sourceItems = descriptors.map { descriptor in
            FileDescriptorSource(fileDescriptor: descriptor, events: .readable) { _, _ in
                fail("RunLoopKit: an idle descriptor source fired")
            }
        }
        for port in portItems { loop.add(port, forMode: .default) }
        for timer in timerItems { loop.add(timer, forMode: .default) }
        for source in sourceItems { loop.add(source, forMode: .default) }
    }

    /// Removes every item and closes the descriptors.
    func remove() {
        for port in portItems { port.invalidate() }
        for timer in timerItems { timer.invalidate() }
        for source in sourceItems { source.invalidate() }
        for descriptor in descriptors { bench_event_close(descriptor) }
    }
}

/// Raises this process's soft limit on open descriptors to at least `count` (up to the hard
/// limit): the tenfold load holds 1,000 eventfds per loop, beyond the usual soft limit of 1,024.
private func raiseDescriptorLimit(to count: Int) {
    var limit = rlimit()
    guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < rlim_t(count) else { return }
    limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
    if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) != 0 { fail("setrlimit(RLIMIT_NOFILE) failed") }
}

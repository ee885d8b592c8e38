import CBenchmarkPeers
import RunLoopKit

/// The `idle` workload's load: items that sit in a loop's mode and never fire — 1,000
/// ports nobody sends to, 1,000 timers due in a day and 100 descriptor sources on eventfds
/// nobody writes. Every handler fails the run, so an item that fired by mistake cannot go
/// unnoticed. A pass that costs in proportion to its items shows up as a slower round trip
/// than the plain `pingpong` row's.
final class IdleItems: Sendable {
    static let ports = 1_000
    static let timers = 1_000
    /// The C eventfd + epoll reference holds as many idle eventfds in each thread's epoll set.
    static let descriptorSources = Int(BENCH_IDLE_DESCRIPTORS)

    private let portItems: [MessagePort]
    private let timerItems: [RunLoopTimer]
    private let sourceItems: [FileDescriptorSource]
    private let descriptors: [Int32]

    /// Creates the items and adds them to `loop`'s default mode (from any thread).
    init(on loop: ThreadRunLoop) {
        portItems = (0..<Self.ports).map { _ in
            let port = RunLoopKitPeer.makePort()
            port.setHandler { _ in fail("RunLoopKit: an idle port received a message") }
            return port
        }
        let farFuture = ContinuousClock.now.advanced(by: .seconds(86_400))
        timerItems = (0..<Self.timers).map { index in
            RunLoopTimer(fireAt: farFuture.advanced(by: .milliseconds(index))) { _ in
                fail("RunLoopKit: an idle timer fired")
            }
        }
        descriptors = (0..<Self.descriptorSources).map { _ in
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

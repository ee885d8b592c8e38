import CBenchmarkPeers

/// A one-shot-at-a-time signal between two threads on a blocking eventfd: the waiter
/// sleeps in the kernel, as every thread in these benchmarks must when idle. Used for
/// "ready", "done" and the wake-up workload's acknowledgement — the same primitive for
/// every Swift peer, so it costs every row the same.
final class KernelEvent: Sendable {
    private let descriptor: Int32

    init() {
        descriptor = bench_event_new()
        if descriptor < 0 { fail("eventfd failed") }
    }

    deinit { bench_event_close(descriptor) }

    func signal() { bench_event_signal(descriptor) }

    func wait() { bench_event_wait(descriptor) }
}

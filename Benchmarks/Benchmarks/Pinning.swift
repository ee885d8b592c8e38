import CBenchmarkPeers

/// Applies a scheduling regime to the whole child process.
///
/// Pinning happens on the main thread before any other thread exists, so every thread
/// created afterwards inherits the one-CPU mask: our own threads, Foundation's, NIO's
/// event loops, ResidentThreads and — the reason it is done this way — Dispatch's
/// worker pool, whose threads we never get to run code on before they serve our queues.
/// Each peer then checks where its threads actually ran (`sched_getcpu` on both sides
/// of every sample) and reports the same-CPU share, which is 100 % when pinned.
enum Pinning {
    static func apply(_ regime: Regime) {
        switch regime {
        case .pinned:
            if bench_pin_current_thread_to_first_cpu() < 0 {
                fail("sched_setaffinity failed: cannot pin to one CPU")
            }
        case .unpinned:
            break  // the inherited mask: every CPU the benchmark was allowed
        }
    }
}

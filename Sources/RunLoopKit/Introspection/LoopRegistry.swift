/// Every live `ThreadRunLoop` of the process, for `runloopctl status`: a loop joins when it is
/// created (once per thread, never on a pass) and is held weakly, so the registry keeps no
/// loop, and no exited thread's loop, alive.
enum LoopRegistry {
    private struct Entry {
        weak var loop: ThreadRunLoop?
    }

    private static let entries = Locked<[Entry]>([])

    /// Adds a new loop. Any thread; a lock, and a sweep of the entries whose loops are gone.
    static func register(_ loop: ThreadRunLoop) {
        entries.withLock { entries in
            entries.removeAll { $0.loop == nil }
            entries.append(Entry(loop: loop))
        }
        TraceRecorders.loopRegistered(loop)
    }

    /// The live loops, in the order they were created. Any thread; a lock.
    static var loops: [ThreadRunLoop] {
        entries.withLock { entries in entries.compactMap(\.loop) }
    }
}

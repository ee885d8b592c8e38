/// Work queued on a loop by `perform(inModes:)` or by its `LoopExecutor`: both run in one FIFO,
/// so a job and a block queued after it keep their order (Guarantees §3.21).
struct PendingBlock {
    /// The modes a block may run in. The usual cases are kept as plain values so that matching
    /// a block against the running mode needs no array walk.
    enum Modes {
        /// Any common mode (the executor's jobs, and blocks queued for `.common`).
        case common
        case one(ThreadRunLoop.Mode)
        case several([ThreadRunLoop.Mode])

        init(_ modes: [ThreadRunLoop.Mode]) {
            if modes.count == 1 {
                self = modes[0] == .common ? .common : .one(modes[0])
            } else {
                self = .several(modes)
            }
        }

        /// Whether a block queued for these modes runs in `mode`; `isCommon` answers whether
        /// `mode` is a common mode, asked only when that matters (it costs a hash lookup).
        @inline(__always)
        func contain(_ mode: ThreadRunLoop.Mode, isCommon: () -> Bool) -> Bool {
            switch self {
            case .common: isCommon()
            case .one(let only): only == mode
            case .several(let modes): modes.contains(mode) || (modes.contains(.common) && isCommon())
            }
        }
    }

    /// What runs: a closure, or a Swift concurrency job (no closure allocated for it).
    enum Work {
        case block(@Sendable () -> Void)
        /// A job of the loop's serial executor: an actor's, run isolated to the loop.
        case job(UnownedJob)
        /// A job of the loop's task executor: nonisolated work of a task that prefers the loop.
        case taskJob(UnownedJob)
    }

    let modes: Modes
    let work: Work

    var isJob: Bool {
        if case .block = work { false } else { true }
    }

    /// An actor's job (not a task's nonisolated job, nor a block).
    var isActorJob: Bool {
        if case .job = work { true } else { false }
    }
}

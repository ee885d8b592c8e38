extension ThreadRunLoop {
    /// The name of the loop's thread, for logs and reports: a `ResidentThread`'s name; otherwise
    /// the kernel's name for the thread (set by `pthread_setname_np` or Foundation's
    /// `Thread.name`; the program's name for the main thread), or "thread <tid>" once the thread
    /// has exited. Any thread; a lock and, for a thread that is not resident, a read of
    /// `/proc/self/task/<tid>/comm`.
    public var threadName: String {
        state.withLock { $0.threadName } ?? owner.kernelName ?? owner.description
    }

    /// The kernel's id of the loop's thread (gettid(2)), as `top -H` and `/proc/<pid>/task`
    /// show it. Any thread; free.
    public var threadID: Int32 { owner.rawValue }
}

/// Runs async code from a peer's synchronous entry point (a child process's main thread).
enum BlockingTask {
    /// Runs `body` in an unstructured task on the cooperative pool and sleeps the calling
    /// thread in the kernel until it returns. The calling thread is never a pool thread, so
    /// sleeping here takes nothing from the tasks being measured.
    static func run<T: Sendable>(_ body: @escaping @Sendable () async -> T) -> T {
        let handoff = Handoff<T>()
        Task {
            handoff.value = await body()
            handoff.done.signal()
        }
        handoff.done.wait()
        return handoff.value!
    }
}

/// `@unchecked Sendable`: `value` is written once by the task before `done` is signalled
/// and read by the waiting thread only after `done.wait()` returns.
private final class Handoff<T>: @unchecked Sendable {
    var value: T?
    let done = KernelEvent()
}

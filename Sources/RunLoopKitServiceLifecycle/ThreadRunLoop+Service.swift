#if ServiceLifecycle
import RunLoopKit
import ServiceLifecycle

extension ThreadRunLoop {
    /// Runs `service` — typically a `ServiceGroup` — in a task while the calling thread runs
    /// this loop's default mode, and returns (or throws what the service threw) once the
    /// service has finished: the way to make `ThreadRunLoop.main` a daemon's main loop.
    ///
    /// ```swift
    /// // main.swift: synchronous top-level code, so the main thread stays the loop's.
    /// let group = ServiceGroup(services: [worker, listener],
    ///                          gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
    /// try ThreadRunLoop.main.run(group)
    /// ```
    ///
    /// While it runs, the main loop serves the main dispatch queue, so `@MainActor` code,
    /// `MainActor.run` and `DispatchQueue.main` work inside the services; signals are the
    /// group's business (service-lifecycle traps them through Dispatch), not the loop's. Ports,
    /// timers and sources added to the loop's default or common modes are serviced meanwhile.
    ///
    /// The service runs in a detached task on the global concurrent executor. When it finishes,
    /// a Source0 of the default mode stops the loop, so the stop lands on a default-mode
    /// invocation; a default-mode run nested inside a callout at that moment takes the stop
    /// instead, and this call returns when the outer run next returns. Main-loop work still
    /// queued then (blocks, `@MainActor` jobs) stays queued. A `stop()` from anywhere else ends
    /// only the run it reaches: the loop runs again until the service has finished.
    ///
    /// Only on the loop's own thread (on any other: a precondition failure naming the mistake);
    /// it blocks that thread for the life of the service. The main thread of a program whose
    /// `main` is `async` belongs to Swift concurrency and cannot call it: keep `main` synchronous.
    public func run(_ service: some Service) throws {
        precondition(ThreadRunLoop.current === self, """
            ThreadRunLoop.run(_ service:) was called on a thread that does not own the loop: call \
            it on the loop's own thread (for ThreadRunLoop.main, the main thread, from a \
            synchronous main).
            """)
        let outcome = Locked<Result<Void, any Error>?>(nil)
        // Keeps the default mode alive for any loop (the main loop's already holds the main
        // queue), and its perform is the stop, so the stop reaches a default-mode invocation.
        let finisher = RunLoopSource { [self] in stop() }
        add(finisher, forMode: .default)
        defer { finisher.invalidate() }

        Task.detached { [self] in
            let result: Result<Void, any Error>
            do {
                try await service.run()
                result = .success(())
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            finisher.signal()
            wakeUp()
        }
        while true {
            if let result = outcome.withLock({ $0 }) {
                try result.get()
                return
            }
            run()
        }
    }
}
#endif

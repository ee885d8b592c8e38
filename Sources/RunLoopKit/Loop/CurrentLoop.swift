#if canImport(Glibc)
import Glibc
#endif

/// The thread-local "current loop" slot. The slot holds a retained reference released by the
/// pthread key destructor when the thread exits, which also empties the loop (CF's
/// __CFFinalizeRunLoop) so items do not keep a dead thread's loop alive.
enum CurrentLoop {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { raw in
            guard let raw else { return }
            let loop = Unmanaged<ThreadRunLoop>.fromOpaque(raw).takeRetainedValue()
            loop.threadDidExit()
        }
        precondition(rc == 0, "RunLoopKit: pthread_key_create failed (\(rc))")
        return key
    }()

    /// The main thread's loop; it may be created from any thread before the main thread asks for it.
    static let mainLoop: ThreadRunLoop = {
        let loop = ThreadRunLoop(owner: .main)
        LoopRegistry.register(loop)
        Introspection.enableFromEnvironmentOnce()
        return loop
    }()

    static func loop() -> ThreadRunLoop {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<ThreadRunLoop>.fromOpaque(raw).takeUnretainedValue()
        }
        let thread = ThreadID.current
        let loop = thread.isMain ? mainLoop : ThreadRunLoop(owner: thread)
        pthread_setspecific(key, Unmanaged.passRetained(loop).toOpaque())
        if !thread.isMain {
            LoopRegistry.register(loop)
            Introspection.enableFromEnvironmentOnce()
        }
        return loop
    }
}

#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// Failures injected into the kernel layer's pidfd and descriptor-refusal calls, for tests and
/// fuzz targets: what a kernel before 6.5 (ENOPROTOOPT, EINVAL) or 6.16 (ENOPROTOOPT for
/// SO_PASSRIGHTS) answers, a peer that is already gone (ESRCH), a process out of descriptors
/// (EMFILE). The callers' fallbacks can then be exercised on a kernel that has every feature.
///
/// An injection holds for the calling thread only, until cleared, so tests running in parallel
/// on other threads never see it: inject on the thread that makes the call (a port's loop
/// thread receives frames and accepts named connections; `makeSendRight` and `connect(to:)`
/// run on their caller's). When no thread has an injection, each checked call costs one
/// relaxed atomic load.
package enum KernelFault {
    /// The calls that can be made to fail.
    package enum Call: Hashable, Sendable, CaseIterable {
        /// pidfd_open(2): `PinnedProcess(pid:)`.
        case pidfdOpen
        /// getsockopt(SO_PEERPIDFD): the connecting process of an accepted named connection.
        case peerPidfd
        /// setsockopt(SO_PASSPIDFD): a pidfd with every record read from a connection.
        case passPidfd
        /// The SCM_PIDFD of a received record: the injected errno replaces the pidfd (which is
        /// closed), as the kernel reports its own failure to make one.
        case receivedPidfd
        /// setsockopt(SO_PASSRIGHTS): a connection that refuses descriptors.
        case passRights
    }

    /// Makes `call` fail with `errno` on the calling thread from now on. Any thread.
    package static func inject(_ errno: Int32, into call: Call) {
        let faults = threadFaults(creating: true)!
        if faults.byCall.isEmpty { armedThreads.add(1, ordering: .sequentiallyConsistent) }
        faults.byCall[call] = errno
    }

    /// Removes every injection of the calling thread. Any thread.
    package static func clearAll() {
        guard let faults = threadFaults(creating: false), !faults.byCall.isEmpty else { return }
        faults.byCall = [:]
        armedThreads.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// The errno injected into `call` on the calling thread, nil when none (the usual case: one
    /// atomic load).
    @inline(__always)
    static func injected(into call: Call) -> Errno? {
        guard armedThreads.load(ordering: .relaxed) > 0 else { return nil }
        return threadFaults(creating: false)?.byCall[call].map(Errno.init(rawValue:))
    }

    /// Threads holding at least one injection.
    private static let armedThreads = Atomic<Int>(0)

    /// One thread's injections, reached through a pthread key.
    private final class ThreadFaults {
        var byCall: [Call: Int32] = [:]
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let rc = pthread_key_create(&key) { raw in
            guard let raw else { return }
            let faults = Unmanaged<ThreadFaults>.fromOpaque(raw).takeRetainedValue()
            if !faults.byCall.isEmpty { KernelFault.armedThreads.subtract(1, ordering: .sequentiallyConsistent) }
        }
        precondition(rc == 0, "RunLoopKit: pthread_key_create failed (\(rc))")
        return key
    }()

    private static func threadFaults(creating: Bool) -> ThreadFaults? {
        if let raw = pthread_getspecific(key) { return Unmanaged<ThreadFaults>.fromOpaque(raw).takeUnretainedValue() }
        guard creating else { return nil }
        let faults = ThreadFaults()
        pthread_setspecific(key, Unmanaged.passRetained(faults).toOpaque())
        return faults
    }
}

import CRunLoopKit

/// An asymmetric memory barrier (membarrier(2), private expedited): for a Dekker pair whose one
/// side runs on every pass of a loop and whose other side runs rarely. The frequent side stores,
/// keeps the compiler from reordering (`light()`), and loads; the rare side stores, runs
/// `heavy()` — the kernel makes every running thread of the process execute a full barrier —
/// and loads. Either one sees the other's store, as with sequentially consistent accesses on both
/// sides, but the frequent side no longer pays a locked instruction for it.
enum ProcessBarrier {
    /// Whether the kernel offers it to this process (Linux 4.14, unless a seccomp filter forbids
    /// it). Registered once, on first use; any thread.
    static let isAvailable: Bool = crlk_membarrier_register() == 0

    /// The frequent side: the compiler keeps the accesses on either side in order. Free.
    @inline(__always)
    static func light() {
        crlk_compiler_barrier()
    }

    /// The rare side: returns after every running thread of the process executed a full barrier.
    /// Only where `isAvailable`. Any thread; a system call, inter-processor interrupts to the
    /// CPUs running this process's threads.
    static func heavy() {
        precondition(crlk_membarrier() == 0, "ProcessBarrier.heavy(): membarrier failed after it was registered")
    }
}

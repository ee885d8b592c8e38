#if canImport(Glibc)
import Glibc
#endif

/// glibc's malloc tuning, which its Swift module does not import (malloc.h is not in it):
/// looked up once with dlsym(3), a no-op where the C library has no such function.
///
/// One client's large request must not stay in the daemon's RSS once its connection closes.
/// glibc serves a large buffer from mmap and unmaps it on free — until the first such free,
/// after which it raises its mmap threshold to that size (up to 32 MiB) and serves large
/// buffers from its arenas instead; freed there, they merge into the arena's top, which a
/// thread's arena keeps (its trim threshold rises with the mmap threshold, and malloc_trim
/// leaves an arena's top alone). So the threshold is fixed at start-up: buffers of 128 KiB or
/// more always come from mmap and go back on free. The smaller ones freed with a large
/// connection are given back by `trim()`.
enum Malloc {
    /// mallopt(M_MMAP_THRESHOLD, 128 KiB): glibc's default, but fixed. Main thread, before
    /// any other thread runs.
    static func fixMmapThreshold() {
        _ = mallopt?(-3 /* M_MMAP_THRESHOLD */, 128 * 1024)
    }

    /// malloc_trim(0): the free memory of every arena back to the system. Walks every arena:
    /// call it rarely (`NetworkServer` does, at most once a second, when a large connection closes).
    static func trim() {
        _ = mallocTrim?(0)
    }

    private static let mallopt: (@convention(c) (Int32, Int32) -> Int32)? = dlsym(nil, "mallopt")   // nil: RTLD_DEFAULT
        .map { unsafeBitCast($0, to: (@convention(c) (Int32, Int32) -> Int32).self) }
    private static let mallocTrim: (@convention(c) (Int) -> Int32)? = dlsym(nil, "malloc_trim")
        .map { unsafeBitCast($0, to: (@convention(c) (Int) -> Int32).self) }
}

import CRunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// A futex word on which one thread sleeps and others wake it: the cheapest sleep and wake
/// the kernel offers (no descriptor, no file operations, no epoll ready list), for a loop
/// whose mode has nothing the kernel must watch.
///
/// The word is 0 while the sleeper may sleep and 1 once it was posted. The sleeper resets it
/// before it looks for work, so a post that lands after the look makes `wait` return at once.
/// Owned by one loop; `wait` and `reset` on the loop's thread only, `post` from any thread.
final class Futex: @unchecked Sendable {
    /// A heap cell: the kernel keys the futex on its address, which must not move.
    private let word: UnsafeMutablePointer<UInt32>

    init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit {
        word.deallocate()
    }

    /// Clears a post that has been seen. Sleeper only.
    func reset() {
        crlk_futex_store(word, 0)
    }

    /// Sleeps until posted, `timeoutNanoseconds` pass (nil: no limit) or a signal arrives;
    /// returns at once when posted since the last `reset`. Returns false on a timeout.
    /// Sleeper only; one futex(2) call.
    func wait(timeoutNanoseconds: Int64?) -> Bool {
        crlk_futex_wait(word, 0, timeoutNanoseconds.map { max(0, $0) } ?? -1) == 0 || errno != ETIMEDOUT
    }

    /// Marks the word posted and wakes the sleeper. Any thread; one futex(2) call.
    func post() {
        crlk_futex_post(word, 1)
    }
}

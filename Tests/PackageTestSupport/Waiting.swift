import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A test failure with a message (thrown so a test stops at the first broken expectation).
package struct TestFailure: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Runs `body` on a new thread and returns its result, so blocking calls (poll, waitpid, a
/// running ThreadRunLoop) never occupy a thread of the Swift concurrency pool.
package func onNewThread<T: Sendable>(_ name: String = "test-helper", _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.name = name
        thread.start()
    }
}

/// Milliseconds left until `deadline`, for poll(2) (0 when it has passed).
package func millisecondsUntil(_ deadline: ContinuousClock.Instant) -> Int32 {
    let left = ContinuousClock.now.duration(to: deadline)
    guard left > .zero else { return 0 }
    let (seconds, attoseconds) = left.components
    return Int32(min(seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1, Int64(Int32.max)))
}

/// Waits until `fd` is ready for `events` or `deadline` passes; true when ready.
package func pollReady(_ fd: Int32, _ events: Int32 = POLLIN, before deadline: ContinuousClock.Instant) -> Bool {
    while true {
        var entry = pollfd(fd: fd, events: Int16(events), revents: 0)
        let n = poll(&entry, 1, millisecondsUntil(deadline))
        if n > 0 { return true }
        if n == 0 { return false }
        if errno != EINTR { return false }
    }
}

/// Calls `body` with a NULL-terminated `char *[]` of copies of `strings`.
package func withCStrings<R>(_ strings: [String], _ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
    var pointers: [UnsafeMutablePointer<CChar>?] = strings.map { strdup($0) }
    pointers.append(nil)
    defer { pointers.forEach { free($0) } }
    return body(pointers)
}

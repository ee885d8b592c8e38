import CRunLoopKit
// Links libdispatch, whose run-loop entry points CRunLoopKit declares.
import Dispatch

/// The main dispatch queue as a source of the main run loop, as CFRunLoop serves it on Linux
/// (`__CFRUNLOOP_IS_SERVICING_THE_MAIN_DISPATCH_QUEUE__`): libdispatch rings an eventfd when the
/// main queue gains work, the loop sleeps on it in its common modes, and drains the queue on the
/// main thread when it rings. Swift concurrency enqueues `@MainActor` jobs on this queue, so the
/// drain is also what runs them.
enum MainDispatchQueue {
    /// The eventfd libdispatch rings for the main queue (made by libdispatch on first use, and
    /// never closed: the main queue lives as long as the process).
    static let handle = FileDescriptor(rawValue: _dispatch_get_main_queue_handle_4CF())

    /// Runs the blocks the main queue holds now. Main thread only; libdispatch ignores a call
    /// nested inside its own drain.
    static func drain() {
        _dispatch_main_queue_callback_4CF(nil)
    }
}

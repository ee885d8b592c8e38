import Foundation

/// Ends the process at once with a message on stderr and a non-zero status.
///
/// A peer that receives a wrong message, a wrong count or a wrong payload calls this
/// from whichever thread noticed: its row must not exist, and the parent process turns
/// the child's exit status into its own failure. `_exit` rather than `exit`, because
/// other threads are still inside the framework under test and atexit handlers could
/// deadlock on them.
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Benchmarks: FAILED: \(message)\n".utf8))
    _exit(3)
}

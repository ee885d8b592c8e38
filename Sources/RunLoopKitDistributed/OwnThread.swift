import RunLoopKit

/// Runs `body`, which blocks, on a thread of its own and suspends the calling task until it
/// returns. `MessagePort.connect(to:)` waits for the owner's loop to answer its handshake (up to
/// 30 s when that loop is busy): a task must not hold a thread of the cooperative pool for that.
/// Any task; a thread start and stop.
func onOwnThread<T: Sendable>(_ name: String, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = ResidentThread(name: name)
        do {
            try thread.perform {
                continuation.resume(returning: body())
                // On the thread itself, stop only asks its loop to end; the thread then exits.
                thread.stop()
            }
        } catch {
            preconditionFailure("a resident thread started a moment ago has already finished")
        }
    }
}

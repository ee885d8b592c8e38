/// Which loop an actor is pinned to, for code built on this package (RunLoopKitDistributed puts
/// a published actor's ports on the loop its methods run on, so that a call reaches the actor
/// with no hand-off between threads).
extension LoopExecutor {
    /// The loop whose executor `executor` is — the `unownedExecutor` of an actor pinned to a loop
    /// (`thread.executor.asUnownedSerialExecutor()`) — or nil for any other executor, a default
    /// actor's included. Any thread; a dynamic cast.
    package static func runLoop(of executor: UnownedSerialExecutor) -> ThreadRunLoop? {
        guard let serial = executor.asSerialExecutor() else { return nil }
        return (serial as AnyObject as? ActorRole)?.runLoop
    }
}

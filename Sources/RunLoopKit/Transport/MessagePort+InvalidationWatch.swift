/// A package-level invalidation notice for transports built on this package (RunLoopKitGRPC's
/// exporter ends a port's remote streams with it). It shares the watcher list that pending
/// requests use (`MessagePort+Request.swift`) and that `invalidate()` empties once; the public
/// invalidation handler stays the user's alone.
extension MessagePort {
    /// Calls `watcher` once when this port is invalidated, on the invalidating thread, after the
    /// port's senders were failed and before its invalidation handler runs; `watcher` must not
    /// block. Returns the watch's token for `stopWatchingInvalidation(_:)`, or nil (and never
    /// calls `watcher`) if the port is invalid already. Any thread; a lock.
    package func watchInvalidation(_ watcher: @escaping @Sendable () -> Void) -> UInt64? {
        let token = Source1Token.next()
        let watching: Bool = lock.withLock {
            guard membership.isValid else { return false }
            state.invalidationWatchers[token] = watcher
            return true
        }
        return watching ? token : nil
    }

    /// Forgets the watch `token` names: its watcher is not called (unless it is being called
    /// already). Idempotent. Any thread; a lock.
    package func stopWatchingInvalidation(_ token: UInt64) {
        lock.withLock { _ = state.invalidationWatchers.removeValue(forKey: token) }
    }
}

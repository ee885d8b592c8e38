import Synchronization

/// A value guarded by a mutex, for state whose contents are not `Sendable` themselves (the
/// loop's modes hold non-Sendable bookkeeping) but are only ever touched with the lock held.
/// `Mutex` would demand `sending` values in and out, which the loop's item bookkeeping
/// (key paths, shared `ModeState` objects) cannot offer.
final class Locked<Value>: @unchecked Sendable {
    private let mutex = Mutex<Void>(())
    // Guarded by `mutex`; the runtime exclusivity check would only repeat what the lock ensures.
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) { self.value = value }

    @inline(__always)
    func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        try mutex.withLock { _ in try body(&value) }
    }
}

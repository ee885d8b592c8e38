/// State that only the loop's own thread touches (its invocations' scratch buffers), kept in a
/// `Sendable` loop without a lock. Correct because every access happens inside `run…` on the
/// owner thread, which `runInvocation` checks with a precondition.
final class LoopThreadOnly<Value>: @unchecked Sendable {
    @exclusivity(unchecked) var value: Value
    init(_ value: Value) { self.value = value }
}

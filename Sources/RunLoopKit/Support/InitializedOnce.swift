/// A reference set once, during its owner's initialiser, and only read afterwards: how a
/// `Sendable` class stores an object that needs `self` to be made (a loop's executor).
/// Publishing the owner to other threads orders the write before every read.
final class InitializedOnce<Value: AnyObject & Sendable>: @unchecked Sendable {
    private var stored: Value?

    init() {}

    /// Sets the value; called once, before the owner is shared.
    func initialize(_ value: Value) {
        precondition(stored == nil, "RunLoopKit: InitializedOnce initialised twice")
        stored = value
    }

    var value: Value { stored.unsafelyUnwrapped }
}

/// Calls a handler on the loop's thread at chosen points of each run (`ThreadRunLoop.Activity`).
/// Observers of one mode are called in ascending `order`. An observer belongs to one loop at
/// most. Observers alone do not keep a mode alive.
public final class RunLoopObserver: Sendable, SingleLoopItem, CustomStringConvertible {
    let activities: ThreadRunLoop.Activity
    let repeats: Bool
    let order: Int
    private let handler: @Sendable (RunLoopObserver, ThreadRunLoop.Activity) -> Void
    let membership = LoopMembership()

    /// Creates an observer of `activities`. With `repeats: false` it invalidates itself after
    /// its first callout. Any thread.
    public init(activities: ThreadRunLoop.Activity, repeats: Bool = true, order: Int = 0,
                handler: @escaping @Sendable (RunLoopObserver, ThreadRunLoop.Activity) -> Void) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.handler = handler
    }

    /// Removes the observer from its loop; it is never called again. Idempotent. Any thread.
    public func invalidate() {
        invalidateMembership()
    }

    /// False once invalidated. Any thread; one atomic load.
    public var isValid: Bool { membership.isValid }

    /// A name for the observer's callouts in loop-health reports (`ThreadRunLoop.Callout.label`),
    /// e.g. "frame metrics". Read only when a callout is reported, so it costs the loop nothing otherwise.
    /// Any thread; a lock.
    public var label: String? {
        get { membership.label }
        set { membership.label = newValue }
    }

    /// The activities, order and validity, for logs. Any thread; allocates the string.
    public var description: String {
        "RunLoopObserver(activities: \(activities), order: \(order), repeats: \(repeats), valid: \(isValid))"
    }

    // MARK: - Loop side

    static var itemKind: WritableKeyPath<ItemSet, [RunLoopObserver]> { \.observers }
    var sortOrder: Int? { order }

    func fire(_ loop: ThreadRunLoop, _ activity: ThreadRunLoop.Activity) {
        guard isValid else { return }
        handler(self, activity)
        if !repeats { invalidate() }
    }

}

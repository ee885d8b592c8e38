import Synchronization

/// What a port's handlers collected during one input (messages, reported errors), filled on
/// the loop thread and taken by the target after the loop returned.
public final class Inbox<Item: Sendable>: Sendable {
    private let items = Mutex<[Item]>([])

    public init() {}

    public func append(_ item: Item) { items.withLock { $0.append(item) } }

    /// Everything collected since the last call.
    public func take() -> [Item] {
        items.withLock { items in
            defer { items = [] }
            return items
        }
    }
}

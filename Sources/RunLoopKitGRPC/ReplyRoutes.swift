#if GRPC
import Synchronization
import RunLoopKit

/// A client stream's reply ports, numbered: a MESSAGE frame names its reply port by number,
/// and the REPLY frames the server sends back are delivered to the port with that number.
/// Ports are held weakly (a `sendRequest` holds its private reply port until its outcome), and
/// the numbers of ports that are gone are forgotten as the table grows, so it stays in
/// proportion to the live reply ports.
final class ReplyRoutes: Sendable {
    private struct Route {
        weak var port: MessagePort?
    }

    private struct Table {
        var routes: [UInt32: Route] = [:]
        var ids: [ObjectIdentifier: UInt32] = [:]
        var nextID: UInt32 = 1
        var sweepAt = 64
    }

    private let table = Mutex(Table())

    /// The number of `port`, assigned on first use. Any thread; a lock.
    func id(for port: MessagePort) -> UInt32 {
        table.withLock { table in
            let key = ObjectIdentifier(port)
            if let id = table.ids[key], table.routes[id]?.port === port { return id }
            if table.routes.count >= table.sweepAt { Self.sweep(&table) }
            let id = table.nextID
            // Zero means "no reply port" on the wire.
            table.nextID = table.nextID == .max ? 1 : table.nextID + 1
            table.routes[id] = Route(port: port)
            table.ids[key] = id
            return id
        }
    }

    /// The live port numbered `id`, if any. Any thread; a lock.
    func port(for id: UInt32) -> MessagePort? {
        table.withLock { $0.routes[id]?.port }
    }

    /// Forgets the ports that are gone or invalid, and sets the next sweep at twice what is left.
    private static func sweep(_ table: inout Table) {
        table.routes = table.routes.filter { $0.value.port?.isValid == true }
        table.ids = Dictionary(uniqueKeysWithValues: table.routes.compactMap { id, route in
            route.port.map { (ObjectIdentifier($0), id) }
        })
        table.sweepAt = max(64, 2 * table.routes.count)
    }
}
#endif

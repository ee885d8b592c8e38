extension MessagePort {
    /// What one user may hold of a published name (Guarantees §3.35), so that no user can take every
    /// connection a daemon can serve: the pending-handshake limit bounds connections that have
    /// not said HELLO yet; this bounds those that have.
    public struct NameLimits: Sendable, Equatable, CustomStringConvertible {
        /// The most connections to the name that processes of one uid (the uid of the process
        /// that connected, as the kernel recorded it) may hold open at once; `connect(to:)` gets
        /// `.tooManyConnections` beyond it, until one of them is closed. Root counts as a user
        /// like any other. Any thread; free.
        public var connectionsPerUser: Int

        /// Limits of `connectionsPerUser` connections per uid (at least 1: a precondition).
        /// Any thread; free.
        public init(connectionsPerUser: Int) {
            precondition(connectionsPerUser >= 1,
                         "MessagePort.NameLimits(connectionsPerUser: \(connectionsPerUser)): a user must be allowed one connection at least")
            self.connectionsPerUser = connectionsPerUser
        }

        /// 1,024 connections per uid, as systemd's sd-varlink allows by default (a quarter of its
        /// 4,096 connections per server). Any thread; free.
        public static let `default` = NameLimits(connectionsPerUser: 1024)

        /// "connectionsPerUser: N", for logs. Any thread; allocates the string.
        public var description: String { "connectionsPerUser: \(connectionsPerUser)" }
    }
}

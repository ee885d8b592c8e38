#if canImport(Glibc)
import Glibc
#endif

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

        /// What fits this process's descriptor budget (§3.62): each named connection costs the
        /// owner two descriptors (its socket and the pidfd of the process that connected), so
        /// one uid may hold a quarter of the connections that the soft `RLIMIT_NOFILE` leaves
        /// room for after a reserve of 128 (the pending handshakes and the process's own), and
        /// at most 1,024, as systemd's sd-varlink allows by default. Under systemd's default soft
        /// limit of 1,024 that is 112: one uid holding all it may leaves room for three more.
        /// Read when first used — raise the limit before publishing. Any thread; free after the
        /// first use, which calls getrlimit(2).
        public static let `default` = NameLimits(connectionsPerUser: fitting(descriptorLimit: softDescriptorLimit))

        /// Descriptors kept out of the connections' budget: the pending handshakes and the rest.
        static let reservedDescriptors = 128
        /// Descriptors one named connection holds in the owner.
        static let descriptorsPerConnection = 2
        /// The share of the connections one uid may hold.
        static let usersSharingTheBudget = 4
        /// The most connections per uid, whatever the budget.
        static let largestDefault = 1024

        /// The per-uid limit for a process whose soft descriptor limit is `limit`.
        static func fitting(descriptorLimit limit: Int) -> Int {
            let connections = max(limit - reservedDescriptors, 0) / descriptorsPerConnection
            return min(max(connections / usersSharingTheBudget, 1), largestDefault)
        }

        /// This process's soft RLIMIT_NOFILE (`Int.max` when unlimited or unknown).
        static var softDescriptorLimit: Int {
            var limit = rlimit()
            guard getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit) == 0,
                  limit.rlim_cur != rlim_t.max else { return Int.max }
            return Int(clamping: limit.rlim_cur)
        }

        /// "connectionsPerUser: N", for logs. Any thread; allocates the string.
        public var description: String { "connectionsPerUser: \(connectionsPerUser)" }
    }
}

extension ThreadRunLoop {
    /// `[.default]`, the default of the `inModes` parameters: one shared array, so that a
    /// `perform` that names no mode allocates none (an array literal in the default argument
    /// would cost every call a malloc and a free on the way to the wake-up).
    @usableFromInline static let defaultModes: [Mode] = [.default]

    /// The name of a run-loop mode: the set of sources, timers and observers a run services.
    ///
    /// A value type, usable from any thread. Creating one costs a String; comparing two is a
    /// String comparison.
    public struct Mode: Hashable, Sendable, RawRepresentable, ExpressibleByStringLiteral, CustomStringConvertible {
        /// The mode's name. Any thread; free.
        public let rawValue: String
        /// The name's hash, computed once: modes are looked up on every run invocation, and
        /// hashing the name each time would cost more than the rest of the lookup.
        private let nameHash: Int

        /// A mode named `rawValue`. Any thread; hashes the name once.
        public init(rawValue: String) {
            self.rawValue = rawValue
            nameHash = rawValue.hashValue
        }

        /// A mode named `name`. Any thread; hashes the name once.
        public init(_ name: String) { self.init(rawValue: name) }

        /// A mode written as a string literal: `let mode: ThreadRunLoop.Mode = "tracking"`.
        public init(stringLiteral value: String) { self.init(rawValue: value) }

        /// Modes are equal when their names are. Any thread; a hash comparison, then the names.
        public static func == (lhs: Mode, rhs: Mode) -> Bool {
            lhs.nameHash == rhs.nameHash && lhs.rawValue == rhs.rawValue
        }

        /// Hashes the name's precomputed hash. Any thread; free.
        public func hash(into hasher: inout Hasher) { hasher.combine(nameHash) }

        /// The mode `run()` and `run(until:)` use. It is a common mode from the start. Any thread;
        /// free.
        public static let `default` = Mode("kCFRunLoopDefaultMode")

        /// The pseudo-mode naming the set of common modes. Items added to it are in every
        /// common mode; running it returns `.finished` at once (it is a set, not a mode). Any
        /// thread; free.
        public static let common = Mode("kCFRunLoopCommonModes")

        /// The mode's name. Any thread; free.
        public var description: String { rawValue }
    }

    /// Why a `run(mode:for:returnAfterSourceHandled:)` invocation returned.
    public enum RunResult: Sendable, Equatable {
        /// The mode had no sources, timers or pending blocks (at start, or it became empty).
        case finished
        /// `stop()` was called (possibly before the invocation started).
        case stopped
        /// The timeout passed.
        case timedOut
        /// `returnAfterSourceHandled` was set and a Source0, port message, fd event or
        /// perform block was handled. Timers never count.
        case handledSource
    }

    /// The points in a run-loop pass at which observers are called.
    public struct Activity: OptionSet, Sendable, Hashable, CustomStringConvertible {
        /// The activities' bits. Any thread; free.
        public let rawValue: UInt32
        /// Activities from their bits. Any thread; free.
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// Once when a run invocation starts. Any thread; free.
        public static let entry = Activity(rawValue: 1 << 0)
        /// At the start of each pass, before due timers are considered. Any thread; free.
        public static let beforeTimers = Activity(rawValue: 1 << 1)
        /// Before perform blocks and signalled Source0s run. Any thread; free.
        public static let beforeSources = Activity(rawValue: 1 << 2)
        /// Just before the thread sleeps in the kernel. Any thread; free.
        public static let beforeWaiting = Activity(rawValue: 1 << 5)
        /// Just after the thread wakes, before what woke it is handled. Any thread; free.
        public static let afterWaiting = Activity(rawValue: 1 << 6)
        /// Once when a run invocation returns. Any thread; free.
        public static let exit = Activity(rawValue: 1 << 7)
        /// Every activity, with CF's value (`kCFRunLoopAllActivities`, `0x0FFFFFFF`), so that a
        /// mask stored or compared across the two is the same. Any thread; free.
        public static let allActivities = Activity(rawValue: 0x0FFF_FFFF)

        /// The activities' names, for logs. Any thread; allocates the string.
        public var description: String {
            let names: [(Activity, String)] = [(.entry, "entry"), (.beforeTimers, "beforeTimers"),
                                               (.beforeSources, "beforeSources"), (.beforeWaiting, "beforeWaiting"),
                                               (.afterWaiting, "afterWaiting"), (.exit, "exit")]
            return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
        }
    }
}

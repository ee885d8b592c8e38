#if canImport(Glibc)
import Glibc
#endif

/// The answer to `status` (Protocols/introspection.md §4.1): each loop as the structures that
/// already describe it see it — `ThreadRunLoop.debugDescription`'s modes and items, the loop's
/// and its ports' `statistics`, the callout a `HangWatch` sees it in. Nothing is counted twice:
/// this reads what the loops keep anyway. Introspection thread only; takes each loop's lock.
enum IntrospectionStatus {
    static func report(skipping skipped: ThreadID?) -> JSONText {
        let loops = LoopRegistry.loops.filter { $0.owner != skipped }
        return .object([
            ("pid", .int(Int(getpid()))),
            ("uid", .unsigned(UInt64(geteuid()))),
            ("command", .string(FileDescriptor.firstLine(ofFile: "/proc/self/comm", capacity: 32))),
            ("loops", .array(loops.map(describe))),
        ])
    }

    private struct Snapshot {
        var modeStack: [ThreadRunLoop.Mode]
        var threadName: String?
        var pendingBlocks: Int
        var commonItems: ItemSet
        var modes: [(mode: ThreadRunLoop.Mode, common: Bool, items: ItemSet)]
        var exited: Bool
    }

    static func describe(_ loop: ThreadRunLoop) -> JSONText {
        // Items are copied under the loop's lock and read after it: a port's statistics take the
        // port's lock, which must not nest inside the loop's.
        let snapshot = loop.state.withLock { state in
            Snapshot(modeStack: state.modeStack, threadName: state.threadName, pendingBlocks: state.blocks.count,
                     commonItems: state.commonItems,
                     modes: state.modes.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key, $0.value.isCommon, $0.value.items) },
                     exited: state.threadExited)
        }
        let waiting = loop.isWaiting
        let watched = loop.healthFlags.load(ordering: .relaxed) & HealthFlags.watched != 0
        let callout = watched && !waiting ? loop.health.calloutInProgress() : nil
        let activity: String = if snapshot.exited { "exited" }
            else if snapshot.modeStack.isEmpty { "not running" }
            else if waiting { "asleep" }
            else if callout != nil { "in callout" }
            else { "running" }
        let statistics = loop.statistics
        return .object([
            ("tid", .int(Int(loop.owner.rawValue))),
            ("thread", .string(snapshot.threadName ?? loop.owner.kernelName)),
            ("main", .bool(loop.isMain)),
            ("state", .string(activity)),
            ("mode", .string(snapshot.modeStack.last?.rawValue)),
            ("runStack", .array(snapshot.modeStack.map { .string($0.rawValue) })),
            ("callout", callout.map(describe) ?? .null),
            ("calloutsVisible", .bool(watched)),
            ("pendingBlocks", .int(snapshot.pendingBlocks)),
            ("statistics", .object([
                ("passes", .unsigned(statistics.passes)),
                ("wakeUps", .unsigned(statistics.wakeUps)),
                ("handledSources", .unsigned(statistics.handledSources)),
                ("timerFires", .unsigned(statistics.timerFires)),
                ("timedCallouts", .unsigned(statistics.timedCallouts)),
            ])),
            ("commonItems", describe(snapshot.commonItems)),
            ("modes", .array(snapshot.modes.map { mode in
                .object([("name", .string(mode.mode.rawValue)), ("common", .bool(mode.common)),
                         ("items", describe(mode.items))])
            })),
        ])
    }

    static func describe(_ callout: ThreadRunLoop.Callout) -> JSONText {
        .object([
            ("kind", .string(callout.kind.description)),
            ("label", .string(callout.label)),
            ("mode", .string(callout.mode.rawValue)),
            ("msgid", callout.msgid.map { .unsigned(UInt64($0)) } ?? .null),
            ("seconds", .seconds(callout.duration)),
        ])
    }

    private static func describe(_ items: ItemSet) -> JSONText {
        let now = ContinuousClock.now
        return .object([
            ("sources", .array(items.sources.map { .object([("label", .string($0.label)), ("order", .int($0.order)),
                                                             ("signalled", .bool($0.isSignalled))]) })),
            ("ports", .array(items.ports.map(describe))),
            ("fileDescriptorSources", .array(items.fileDescriptorSources.map {
                .object([("label", .string($0.label)), ("fd", .int(Int($0.fileDescriptor)))])
            })),
            ("timers", .array(items.timers.map { timer in
                .object([("label", .string(timer.label)), ("firesIn", .seconds(now.duration(to: timer.fireDate))),
                         ("interval", .seconds(timer.interval))])
            })),
            ("observers", .array(items.observers.map { .object([("label", .string($0.label))]) })),
        ])
    }

    private static func describe(_ port: MessagePort) -> JSONText {
        let statistics = port.statistics
        return .object([
            ("label", .string(port.label)),
            ("name", .string(port.publishedName)),
            ("queued", .int(port.queuedCount)),
            ("queueLimit", .int(port.queueLimit)),
            ("sent", .unsigned(statistics.sent)),
            ("delivered", .unsigned(statistics.delivered)),
            ("discarded", .unsigned(statistics.discarded)),
            ("queueHighWater", .int(statistics.queueHighWater)),
            ("sendersBlocked", .unsigned(statistics.sendersBlocked)),
        ])
    }
}

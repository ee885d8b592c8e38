#if canImport(Glibc)
import Glibc
#endif

/// `runloopctl trace`: while one is attached, every callout of every loop, and every message the
/// process's ports send or deliver, is recorded into a bounded buffer per attached trace, which
/// the introspection thread drains to `runloopctl` (Guarantees §3.48). Attached, a callout costs
/// two clock reads, its label and a lock; with no trace attached the callout hook costs nothing
/// more than before (the "traced" bit rides in the loop's one health-flags load) and the message
/// sites one relaxed load (`MessageMonitors.active`, shared with monitors).
enum TraceRecorders {
    /// The attached traces.
    private static let attached = Locked<[TraceRecorder]>([])

    /// Whether any trace is attached. Any thread; a lock.
    static var isAttached: Bool { attached.withLock { !$0.isEmpty } }

    /// Attaches `recorder`: every live loop starts recording its callouts, and the message sites
    /// start copying. Introspection thread.
    static func attach(_ recorder: TraceRecorder) {
        let first = attached.withLock { recorders in
            recorders.append(recorder)
            return recorders.count == 1
        }
        if first { setTraced(true) }
        MessageMonitors.refreshActive()
    }

    /// Detaches `recorder`; the last one out turns recording off everywhere. Introspection thread.
    static func detach(_ recorder: TraceRecorder) {
        let last = attached.withLock { recorders in
            let before = recorders.count
            recorders.removeAll { $0 === recorder }
            return before > 0 && recorders.isEmpty
        }
        if last { setTraced(false) }
        MessageMonitors.refreshActive()
    }

    /// A loop made while a trace is attached records too. Any thread.
    static func loopRegistered(_ loop: ThreadRunLoop) {
        if isAttached { loop.health.setTraced(true, flags: loop.healthFlags) }
    }

    private static func setTraced(_ traced: Bool) {
        for loop in LoopRegistry.loops { loop.health.setTraced(traced, flags: loop.healthFlags) }
    }

    /// A callout returned on a traced loop. Loop thread.
    @inline(never)
    static func callout(_ kind: ThreadRunLoop.Callout.Kind, label: String?, mode: ThreadRunLoop.Mode, msgid: UInt32?,
                        thread: ThreadID, began: Int64, ended: Int64) {
        push(.callout(kind: kind, label: label, mode: mode.rawValue, msgid: msgid, tid: thread.rawValue,
                      began: began, ended: ended))
    }

    /// A message sent or delivered by `port` (from `MessageMonitors`, which the sites call);
    /// `remote`: delivered from another process. Sender's or loop thread.
    static func message(_ direction: MonitorRecord.Direction, _ port: MessagePort, msgid: UInt32, remote: Bool) {
        let recorders = attached.withLock { $0 }
        guard !recorders.isEmpty else { return }
        let event = TraceEvent.message(
            direction: direction, port: port.token, label: port.label, msgid: msgid,
            remote: remote, tid: ThreadID.current.rawValue, time: LoopInstant.now.nanoseconds,
            // A proxy has no queue of its own here: its depth is the peer's.
            queued: port.isProxy ? nil : port.queuedCount)
        for recorder in recorders { recorder.push(event) }
    }

    private static func push(_ event: TraceEvent) {
        for recorder in attached.withLock({ $0 }) { recorder.push(event) }
    }
}

/// One recorded event, as `runloopctl trace` receives it (Protocols/introspection.md §4.3).
/// Times are CLOCK_BOOTTIME nanoseconds, Perfetto's default trace clock.
enum TraceEvent: Sendable {
    case callout(kind: ThreadRunLoop.Callout.Kind, label: String?, mode: String, msgid: UInt32?, tid: pid_t,
                 began: Int64, ended: Int64)
    case message(direction: MonitorRecord.Direction, port: UInt64, label: String?, msgid: UInt32, remote: Bool,
                 tid: pid_t, time: Int64, queued: Int?)

    var json: JSONText {
        switch self {
        case .callout(let kind, let label, let mode, let msgid, let tid, let began, let ended):
            .object([
                ("event", .string("callout")), ("tid", .int(Int(tid))), ("kind", .string(kind.description)),
                ("label", .string(label)), ("mode", .string(mode)),
                ("msgid", msgid.map { .unsigned(UInt64($0)) } ?? .null),
                ("begin", .integer(began)), ("end", .integer(ended)),
            ])
        case .message(let direction, let port, let label, let msgid, let remote, let tid, let time, let queued):
            .object([
                ("event", .string(direction.rawValue)), ("tid", .int(Int(tid))), ("port", .unsigned(port)),
                ("label", .string(label)), ("msgid", .unsigned(UInt64(msgid))), ("remote", .bool(remote)),
                ("time", .integer(time)),
                ("queued", queued.map { .int($0) } ?? .null),
            ])
        }
    }
}

/// One attached trace: a bounded buffer filled by the loops and the message sites, drained by the
/// introspection thread. Any thread pushes; the introspection thread drains.
final class TraceRecorder: Sendable {
    /// The most events a trace holds before it drops.
    static let capacity = 65536

    private struct Buffer {
        var events: [TraceEvent] = []
        var dropped: UInt64 = 0
        var droppedReported: UInt64 = 0
    }
    private let buffer = Locked(Buffer())
    /// Rung on the first event into an empty buffer: one wake-up of the introspection thread per
    /// burst, not per event.
    private let wake: @Sendable () -> Void

    init(wake: @escaping @Sendable () -> Void) {
        self.wake = wake
    }

    func push(_ event: TraceEvent) {
        let first = buffer.withLock { buffer -> Bool in
            guard buffer.events.count < Self.capacity else {
                buffer.dropped &+= 1
                return false
            }
            buffer.events.append(event)
            return buffer.events.count == 1
        }
        if first { wake() }
    }

    /// What the buffer holds, and how many were dropped since the last take. Introspection thread.
    func take() -> (events: [TraceEvent], dropped: UInt64) {
        buffer.withLock { buffer in
            defer {
                buffer.events.removeAll(keepingCapacity: true)
                buffer.droppedReported = buffer.dropped
            }
            return (buffer.events, buffer.dropped - buffer.droppedReported)
        }
    }

    /// Events the socket could not take, put back at the front (still bounded).
    func putBack(_ events: ArraySlice<TraceEvent>) {
        buffer.withLock { buffer in
            let room = Self.capacity - buffer.events.count
            let kept = events.prefix(max(0, room))
            buffer.dropped &+= UInt64(events.count - kept.count)
            buffer.events.insert(contentsOf: kept, at: 0)
        }
    }

    var isEmpty: Bool { buffer.withLock { $0.events.isEmpty } }
}

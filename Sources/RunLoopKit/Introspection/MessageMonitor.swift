import FoundationEssentials
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// `runloopctl monitor`: the send and delivery sites copy each message's header (and, when
/// asked, its first bytes) into a bounded buffer per attached monitor, which the introspection
/// thread drains to the monitor's socket (Guarantees §3.46). With no monitor attached each site
/// costs one relaxed atomic load; attached, a copy and a lock — never a block and never growth:
/// what a full buffer cannot take is counted as dropped and reported to the monitor. The same
/// sites feed `runloopctl trace` (`TraceRecorders`).
enum MessageMonitors {
    /// Whether any monitor or trace is attached: the only thing the sites read when none is.
    static let active = Atomic<Bool>(false)
    private static let attached = Locked<[MessageMonitor]>([])

    static func attach(_ monitor: MessageMonitor) {
        attached.withLock { monitors in
            monitors.append(monitor)
            active.store(true, ordering: .relaxed)
        }
    }

    static func detach(_ monitor: MessageMonitor) {
        attached.withLock { monitors in
            monitors.removeAll { $0 === monitor }
            active.store(!monitors.isEmpty || TraceRecorders.isAttached, ordering: .relaxed)
        }
    }

    /// Recomputes `active` after a trace attached or detached: under the monitors' lock, so that
    /// a monitor detaching at the same time cannot store a stale value last. Any thread.
    static func refreshActive() {
        attached.withLock { monitors in
            active.store(!monitors.isEmpty || TraceRecorders.isAttached, ordering: .relaxed)
        }
    }

    /// A message `port` accepts for sending (a local port's queue or a proxy's socket): before it
    /// is queued, so that its delivery is never recorded first. Sender's thread.
    @inline(never)
    static func sent(_ port: MessagePort, msgid: UInt32, payload: borrowing MessagePort.Message.Payload, hasReply: Bool) {
        record(.sent, port, msgid: msgid, components: payload.components, hasReply: hasReply, sender: nil)
    }

    /// A message handed to `port`'s handler or delegate. Loop thread.
    @inline(never)
    static func delivered(_ port: MessagePort, _ message: borrowing MessagePort.Message) {
        record(.delivered, port, msgid: message.msgid, components: message.components, hasReply: message.replyPort != nil,
               sender: message.sender)
    }

    private static func record(_ direction: MonitorRecord.Direction, _ port: MessagePort, msgid: UInt32,
                               components: [MessagePort.Message.Component], hasReply: Bool, sender: MessagePort.Sender?) {
        TraceRecorders.message(direction, port, msgid: msgid, remote: sender.map { $0.pid != getpid() } ?? false)
        let monitors = attached.withLock { $0 }
        guard !monitors.isEmpty else { return }
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        let record = MonitorRecord(
            time: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec), direction: direction,
            port: port.label ?? "#\(port.token)", portName: port.publishedName, msgid: msgid,
            components: components.map { component in
                switch component {
                case .data(let data): .data(size: data.count, prefix: data)
                case .port: .port
                }
            },
            hasReply: hasReply, sender: sender)
        for monitor in monitors { monitor.push(record) }
    }
}

/// One message as a monitor sees it.
struct MonitorRecord: Sendable {
    enum Direction: String, Sendable { case sent, delivered }
    enum Component: Sendable {
        /// A Data of `size` bytes; a monitor keeps only the first `MessageMonitor.bytes` of them.
        case data(size: Int, prefix: Data)
        case port
    }

    var time: Int64
    var direction: Direction
    var port: String
    var portName: String?
    var msgid: UInt32
    var components: [Component]
    var hasReply: Bool
    var sender: MessagePort.Sender?

    func json(bytes: Int) -> JSONText {
        .object([
            ("time", .integer(time)),
            ("direction", .string(direction.rawValue)),
            ("port", .string(port)),
            ("name", .string(portName)),
            ("msgid", .unsigned(UInt64(msgid))),
            ("components", .array(components.map { component in
                switch component {
                case .data(let size, let data):
                    var members: [(String, JSONText)] = [("type", .string("data")), ("size", .int(size))]
                    if bytes > 0 {
                        let hex = data.map { byte in
                            let digits = String(byte, radix: 16)
                            return digits.count == 1 ? "0" + digits : digits
                        }.joined()
                        members.append(("hex", .string(hex)))
                    }
                    return .object(members)
                case .port:
                    return .object([("type", .string("port"))])
                }
            })),
            ("reply", .bool(hasReply)),
            ("sender", sender.map { .object([("pid", .int(Int($0.pid))), ("uid", .unsigned(UInt64($0.uid)))]) } ?? .null),
        ])
    }
}

/// One attached monitor: a bounded buffer filled by the sites, drained by the introspection
/// thread. Any thread pushes; the introspection thread drains.
final class MessageMonitor: Sendable {
    /// The most records a monitor holds before it drops.
    static let capacity = 4096

    /// Payload bytes shown per data component (`runloopctl monitor --bytes N`).
    let bytes: Int
    private struct Buffer {
        var records: [MonitorRecord] = []
        var dropped: UInt64 = 0
        var droppedReported: UInt64 = 0
    }
    private let buffer = Locked(Buffer())
    /// Rung on the first record into an empty buffer: one wake-up of the introspection thread per
    /// burst, not per message.
    private let wake: @Sendable () -> Void

    init(bytes: Int, wake: @escaping @Sendable () -> Void) {
        self.bytes = max(0, bytes)
        self.wake = wake
    }

    func push(_ record: MonitorRecord) {
        var kept = record
        // Only the size and the bytes asked for are kept: the buffer never pins a payload.
        kept.components = record.components.map { component in
            guard case .data(let size, let data) = component else { return component }
            return .data(size: size, prefix: bytes == 0 ? Data() : Data(data.prefix(bytes)))
        }
        let first = buffer.withLock { buffer -> Bool in
            guard buffer.records.count < Self.capacity else {
                buffer.dropped &+= 1
                return false
            }
            buffer.records.append(kept)
            return buffer.records.count == 1
        }
        if first { wake() }
    }

    /// What the buffer holds, and how many were dropped since the last take. Introspection thread.
    func take() -> (records: [MonitorRecord], dropped: UInt64) {
        buffer.withLock { buffer in
            defer {
                buffer.records.removeAll(keepingCapacity: true)
                buffer.droppedReported = buffer.dropped
            }
            return (buffer.records, buffer.dropped - buffer.droppedReported)
        }
    }

    /// Records the socket could not take put back at the front (still bounded: they came out of it).
    func putBack(_ records: ArraySlice<MonitorRecord>) {
        buffer.withLock { buffer in
            let room = Self.capacity - buffer.records.count
            let kept = records.prefix(max(0, room))
            buffer.dropped &+= UInt64(records.count - kept.count)
            buffer.records.insert(contentsOf: kept, at: 0)
        }
    }
}

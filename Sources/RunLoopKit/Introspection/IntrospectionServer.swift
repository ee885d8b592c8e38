#if canImport(Glibc)
import Glibc
#endif

/// The introspection endpoint while `Introspection` is on: a listening socket at
/// `runloopkit-introspection/<pid>` and the `ResidentThread` that serves it
/// (Protocols/introspection.md). Each connection is admitted by the kernel's credentials of
/// its peer, asks one thing and gets its answer; nothing a peer sends can block a loop of the
/// process, and every descriptor is closed with its connection.
final class IntrospectionServer: Sendable {
    /// The abstract address of process `pid`'s endpoint.
    static func address(of pid: pid_t) -> [UInt8] { Array("runloopkit-introspection/\(pid)".utf8) }

    /// The longest request a peer may send.
    static let requestCapacity = 256

    private let listener: UnixListener
    private let thread: ResidentThread
    private let acceptSource: FileDescriptorSource
    /// Open connections by descriptor. Introspection thread, but for `stop()`.
    private let connections = Locked<[Int32: IntrospectionConnection]>([:])

    init() throws(PortError) {
        let listener: UnixListener
        do {
            listener = try UnixListener.listen(abstractName: Self.address(of: getpid()))
        } catch {
            if error.rawValue == EADDRINUSE {
                throw .nameInUse(String(decoding: Self.address(of: getpid()), as: UTF8.self))
            }
            throw .resourceExhausted(errno: error.rawValue)
        }
        self.listener = listener
        thread = ResidentThread(name: "rlk-introspect")
        let connections = self.connections
        let serverThread = thread.runLoop.owner
        acceptSource = FileDescriptorSource(fileDescriptor: listener.descriptor.rawValue, events: .readable) { _, _ in
            Self.acceptAll(listener, into: connections, serverThread: serverThread)
        }
        acceptSource.label = "introspection endpoint"
        thread.runLoop.add(acceptSource, forMode: .default)
    }

    func stop() {
        try? thread.perform(waitUntilDone: true) { [acceptSource, connections] in
            acceptSource.invalidate()
            for connection in connections.withLock({ connections in
                defer { connections.removeAll() }
                return Array(connections.values)
            }) { connection.close() }
        }
        thread.stop()
        listener.close()
    }

    /// Accepts every waiting connection. A peer of another uid (but root) is told why and closed
    /// before it can ask anything. Introspection thread.
    private static func acceptAll(_ listener: UnixListener, into connections: Locked<[Int32: IntrospectionConnection]>,
                                  serverThread: ThreadID) {
        while true {
            let socket: SeqPacketSocket
            do {
                guard let accepted = try listener.accept() else { return }
                socket = accepted
            } catch {
                // Out of descriptors: the connection waits in the backlog; it is taken when
                // the next one arrives, or the client gives up.
                return
            }
            let peer = socket.peerCredentials
            guard let peer, peer.uid == geteuid() || peer.uid == 0 else {
                let refusal = JSONText.object([
                    ("error", .string("access denied: only uid \(geteuid()) or root may inspect process \(getpid())")),
                ])
                try? socket.send(Array(refusal.text.utf8))
                socket.close()
                continue
            }
            let fd = socket.descriptor.rawValue
            let connection = IntrospectionConnection(socket: socket, serverThread: serverThread) {
                _ = connections.withLock { $0.removeValue(forKey: fd) }
            }
            connections.withLock { $0[fd] = connection }
            connection.start(on: ThreadRunLoop.current)
        }
    }
}

/// One admitted `runloopctl` connection: reads its request, answers it, and closes (a `monitor`
/// or `trace` stays attached until the peer hangs up). Introspection thread only.
final class IntrospectionConnection: @unchecked Sendable {
    private let socket: SeqPacketSocket
    private let serverThread: ThreadID
    private let onClose: @Sendable () -> Void
    private var source: FileDescriptorSource?
    private var closed = false
    /// While attached as a monitor: its buffer, the source its first record signals, and drops
    /// not yet told to the peer.
    private var monitor: MessageMonitor?
    private var drainSource: RunLoopSource?
    private var untoldDrops: UInt64 = 0
    /// While attached as a trace: its buffer, and whether the peer asked to end it (then the rest
    /// of the buffer is sent, then `{"end":true}`, then the connection closes).
    private var trace: TraceRecorder?
    private var traceEnding = false

    init(socket: SeqPacketSocket, serverThread: ThreadID, onClose: @escaping @Sendable () -> Void) {
        self.socket = socket
        self.serverThread = serverThread
        self.onClose = onClose
    }

    func start(on loop: ThreadRunLoop) {
        let source = FileDescriptorSource(fileDescriptor: socket.descriptor.rawValue, events: .readable) { [self] _, events in
            readable(events)
        }
        source.label = "introspection client"
        self.source = source
        loop.add(source, forMode: .default)
    }

    private func readable(_ events: FileDescriptorSource.Events) {
        guard monitor != nil || trace != nil else {
            readRequest()
            return
        }
        if events.contains(.writable) {
            source?.events = .readable
            drain()
        }
        if events.contains(.readable) {
            // An attached monitor says nothing more: anything but end-of-stream is ignored.
            while true {
                guard let record = try? socket.receiveSmallRecord(capacity: IntrospectionServer.requestCapacity) else { break }
                if record.bytes.isEmpty {
                    close()
                    return
                }
                if trace != nil {
                    endTrace()
                    if closed { return }
                }
            }
        }
    }

    /// `monitor [BYTES]`: attaches; from now on every message the process's ports send or
    /// deliver is copied into the monitor's buffer and sent on by `drain`.
    private func startMonitoring(bytes: Int, on loop: ThreadRunLoop) {
        let drainSource = RunLoopSource { [self] in drain() }
        self.drainSource = drainSource
        loop.add(drainSource, forMode: .default)
        let monitor = MessageMonitor(bytes: bytes) {
            drainSource.signal()
            loop.wakeUp()
        }
        self.monitor = monitor
        send(.object([("monitoring", .int(Int(getpid()))), ("bytes", .int(bytes))]))
        MessageMonitors.attach(monitor)
    }

    /// `trace`: attaches; from now on every callout of every loop (but this thread's), and every
    /// message the process's ports send or deliver, is recorded and sent on by `drain`.
    private func startTracing(on loop: ThreadRunLoop) {
        let drainSource = RunLoopSource { [self] in drain() }
        self.drainSource = drainSource
        loop.add(drainSource, forMode: .default)
        let trace = TraceRecorder {
            drainSource.signal()
            loop.wakeUp()
        }
        self.trace = trace
        let loops = LoopRegistry.loops.filter { $0.owner != serverThread }
        send(.object([
            ("tracing", .int(Int(getpid()))),
            ("command", .string(FileDescriptor.firstLine(ofFile: "/proc/self/comm", capacity: 32))),
            ("loops", .array(loops.map { loop in
                .object([("tid", .int(Int(loop.owner.rawValue))), ("thread", .string(loop.threadName)),
                         ("main", .bool(loop.isMain))])
            })),
        ]))
        TraceRecorders.attach(trace)
        // The introspection thread's own callouts would record the trace's own draining, whose
        // record would wake it to drain again: never traced. This callout began untraced.
        loop.health.setTraced(false, flags: loop.healthFlags)
    }

    /// The peer asked to end the trace: nothing more is recorded; what was is sent, then the end.
    private func endTrace() {
        guard let trace, !traceEnding else { return }
        traceEnding = true
        TraceRecorders.detach(trace)
        drain()
    }

    /// Sends what the monitor's buffer holds, without blocking: when the peer's socket is full,
    /// the rest goes back to the buffer (whose bound counts the overflow as dropped) until the
    /// socket is writable again.
    private func drain() {
        if trace != nil {
            drainTrace()
            return
        }
        guard let monitor, !closed else { return }
        let (records, dropped) = monitor.take()
        untoldDrops &+= dropped
        if untoldDrops > 0 {
            guard sendOrWait(.object([("dropped", .unsigned(untoldDrops))])) else {
                monitor.putBack(records[...])
                return
            }
            untoldDrops = 0
        }
        for (index, record) in records.enumerated() where !sendOrWait(record.json(bytes: monitor.bytes)) {
            if !closed { monitor.putBack(records[index...]) }
            return
        }
    }

    /// `drain` for a trace: the same, and at the end the end.
    private func drainTrace() {
        guard let trace, !closed else { return }
        let (events, dropped) = trace.take()
        untoldDrops &+= dropped
        if untoldDrops > 0 {
            guard sendOrWait(.object([("dropped", .unsigned(untoldDrops))])) else {
                trace.putBack(events[...])
                return
            }
            untoldDrops = 0
        }
        for (index, event) in events.enumerated() where !sendOrWait(event.json) {
            if !closed { trace.putBack(events[index...]) }
            return
        }
        if traceEnding, trace.isEmpty, sendOrWait(.object([("end", .bool(true))])) { close() }
    }

    /// Sends one record; false when the socket is full (then waits for it to be writable) or the
    /// peer is gone (then closes).
    private func sendOrWait(_ value: JSONText) -> Bool {
        do {
            try socket.send(Array(value.text.utf8))
            return true
        } catch {
            if error == .wouldBlock {
                source?.events = [.readable, .writable]
            } else {
                close()
            }
            return false
        }
    }

    private func readRequest() {
        let record: (bytes: [UInt8], credentials: Credentials?, extras: Bool)
        do {
            guard let received = try socket.receiveSmallRecord(capacity: IntrospectionServer.requestCapacity) else { return }
            record = received
        } catch {
            close()
            return
        }
        guard !record.bytes.isEmpty else {
            close()
            return
        }
        guard record.bytes.count <= IntrospectionServer.requestCapacity, !record.extras else {
            answer(error: "request too long or with descriptors")
            return
        }
        let words = String(decoding: record.bytes, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
        switch words.first {
        case "status":
            let report = IntrospectionStatus.report(skipping: serverThread)
            send(report)
            close()
        case "monitor":
            let bytes = words.count > 1 ? Int(words[1]) : 0
            guard let bytes, (0...65536).contains(bytes) else {
                answer(error: "monitor: BYTES must be 0–65536")
                return
            }
            startMonitoring(bytes: bytes, on: ThreadRunLoop.current)
        case "trace":
            startTracing(on: ThreadRunLoop.current)
        default:
            answer(error: "unknown request \"\(words.first.map(String.init) ?? "")\"")
        }
    }

    private func answer(error: String) {
        send(.object([("error", .string(error))]))
        close()
    }

    /// Sends one record without blocking; a peer that does not read loses it.
    @discardableResult
    func send(_ value: JSONText) -> Bool {
        do {
            try socket.send(Array(value.text.utf8))
            return true
        } catch {
            return false
        }
    }

    func close() {
        guard !closed else { return }
        closed = true
        if let monitor { MessageMonitors.detach(monitor) }
        monitor = nil
        if let trace, !traceEnding { TraceRecorders.detach(trace) }
        trace = nil
        drainSource?.invalidate()
        drainSource = nil
        source?.invalidate()
        source = nil
        socket.close()
        onClose()
    }
}

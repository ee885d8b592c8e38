#if canImport(Glibc)
import Glibc
#endif

/// The owner's side of a published name (Protocols/named-ports.md §4–6): the listening socket,
/// the connections that have not said HELLO yet, and a timerfd for their deadline. Its
/// descriptors are Source1s of the port — registered in every mode that holds the port, like
/// its connections — so accepting and handshaking happen on the port's loop thread, without
/// blocking it: every socket is non-blocking, and a peer that stays silent only holds one
/// pending slot until its deadline.
///
/// Locking: `state` is taken after the loop's and the port's locks, never before them. Every
/// use of a descriptor happens with it held and `closed` false, so `close` (any thread) never
/// closes a descriptor the loop thread is using.
final class NameListener: Sendable {
    let name: PortName
    let access: MessagePort.Access
    let limits: MessagePort.NameLimits

    /// How long a connection may wait before its HELLO arrives.
    static let helloTimeout: Duration = .seconds(5)
    /// The most connections waiting for their HELLO; a new one crowds out the oldest.
    static let maximumPending = 64
    /// Connections accepted per readiness report, so a flood cannot monopolise the loop.
    static let acceptBatch = 16
    /// How long accepting pauses after the process ran out of descriptors.
    static let exhaustionPause: Duration = .milliseconds(250)

    private struct Pending {
        let socket: SeqPacketSocket
        let source: FileDescriptorSource
        let deadline: ContinuousClock.Instant
    }

    private struct State {
        var closed = false
        var pending: [Int32: Pending] = [:]
        /// Accepting is paused (unregistered) until the timer fires: out of descriptors.
        var acceptPaused = false
    }

    private let listener: UnixListener
    private let timer: TimerFD
    private let state = Locked(State())
    private let listenerSource: FileDescriptorSource
    private let timerSource: FileDescriptorSource
    private weak let port: MessagePort?
    /// The address the listener is bound to, while it counts as one of this process's (§3.60).
    private let address: [UInt8]?
    /// Rate-limits the reports of refused, crowded-out and silent handshakes.
    let reports = ReportThrottle()

    /// Connections accepted and waiting for their HELLO (at most `maximumPending`). Any thread; a lock.
    var pendingCount: Int { state.withLock { $0.pending.count } }

    init(port: MessagePort, name: PortName, listener: UnixListener, access: MessagePort.Access,
         limits: MessagePort.NameLimits) throws(Errno) {
        self.name = name
        self.access = access
        self.limits = limits
        self.listener = listener
        address = listener.abstractName
        timer = try TimerFD()
        self.port = port
        let box = WeakListener()
        listenerSource = FileDescriptorSource(fileDescriptor: listener.descriptor.rawValue, events: .readable) { _, _ in
            box.listener?.acceptWaiting()
        }
        timerSource = FileDescriptorSource(fileDescriptor: timer.descriptor.rawValue, events: .readable) { _, _ in
            box.listener?.timerFired()
        }
        box.listener = self
        if let address { OwnReturns.listening(at: address) }
    }

    /// The descriptors to register in each mode of the port (any thread; takes `state`).
    var registrations: [Source1Registration] {
        state.withLock { state in
            guard !state.closed else { return [] }
            var all = timerSource.source1Registrations
            if !state.acceptPaused { all += listenerSource.source1Registrations }
            for pending in state.pending.values { all += pending.source.source1Registrations }
            return all
        }
    }

    // MARK: - Loop thread

    private func acceptWaiting() {
        guard let port else { return }
        for _ in 0..<Self.acceptBatch {
            var crowdedOut: Pending?
            let outcome: Result<Pending?, Errno> = state.withLock { state in
                guard !state.closed else { return .success(nil) }
                let socket: SeqPacketSocket?
                do throws(Errno) { socket = try listener.accept() } catch { return .failure(error) }
                guard let socket else { return .success(nil) }
                if state.pending.count >= Self.maximumPending,
                   let oldest = state.pending.values.min(by: { $0.deadline < $1.deadline }) {
                    state.pending[oldest.socket.descriptor.rawValue] = nil
                    crowdedOut = oldest
                }
                let fd = socket.descriptor.rawValue
                let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { [weak self] _, _ in
                    self?.helloReadable(socket)
                }
                let pending = Pending(socket: socket, source: source, deadline: .now + Self.helloTimeout)
                state.pending[fd] = pending
                return .success(pending)
            }
            if let crowdedOut { finish(crowdedOut, of: port, reporting: .handshakeFailed(.crowdedOut)) }
            switch outcome {
            case .success(nil):
                rearmTimer()
                return
            case .success(let pending?):
                for registration in pending.source.source1Registrations {
                    port.membership.loop?.addRegistration(registration, for: port) {
                        state.withLock { $0.pending[pending.socket.descriptor.rawValue] != nil }
                    }
                }
            case .failure(let error):
                // Out of descriptors: a level-triggered listener would wake the loop at once,
                // over and over. Stop listening for a moment, and say why.
                pauseAccepting(of: port)
                report(MessagePort.TransportReport(error: .resourceExhausted(errno: error.rawValue)), to: port)
                return
            }
        }
        rearmTimer()
    }

    /// What a readable pending connection came to.
    private enum HelloOutcome {
        case accepted(PortConnection)
        /// The peer closed, or the answer could not be sent: dropped without a report.
        case closedQuietly
        case refused(MessagePort.TransportReport)
    }

    private func helloReadable(_ socket: SeqPacketSocket) {
        guard let port else { return }
        let fd = socket.descriptor.rawValue
        // Read before `state` (whose lock is taken after the port's): only this thread, the
        // loop's, changes them, so they are current when the HELLO is answered.
        let connectionsByUser = port.namedConnectionsByUser
        let result: (Pending, HelloOutcome)? = state.withLock { state in
            guard !state.closed, let pending = state.pending[fd] else { return nil }
            let record: (bytes: [UInt8], credentials: Credentials?, extras: Bool)?
            do {
                record = try socket.receiveSmallRecord(capacity: Handshake.maximumSize)
            } catch {
                state.pending[fd] = nil
                return (pending, .closedQuietly)
            }
            guard let record else { return nil }
            state.pending[fd] = nil
            return (pending, answer(record, on: socket, connectionsByUser: connectionsByUser))
        }
        guard let (pending, outcome) = result else { return }
        unregister(pending, from: port)
        switch outcome {
        case .accepted(let connection):
            if !port.addConnection(connection) { pending.socket.close() }
        case .closedQuietly:
            pending.socket.close()
        case .refused(let refusal):
            pending.socket.close()
            report(refusal, to: port)
        }
        rearmTimer()
    }

    /// Decides on a HELLO record and sends the answer (with `state` held).
    private func answer(_ record: (bytes: [UInt8], credentials: Credentials?, extras: Bool), on socket: SeqPacketSocket,
                        connectionsByUser: [UInt32: Int]) -> HelloOutcome {
        if record.bytes.isEmpty && !record.extras { return .closedQuietly }
        let connector = Self.connector(of: socket)
        func refused(_ error: PortError, sender: MessagePort.Sender? = nil) -> HelloOutcome {
            .refused(MessagePort.TransportReport(error: error, sender: sender, connector: connector))
        }
        if record.extras { return refused(.handshakeFailed(.unexpectedControlMessage)) }
        guard let credentials = record.credentials, let connector else {
            return refused(.handshakeFailed(.missingCredentials))
        }
        // The HELLO comes from the process that connected: the kernel recorded it at connect(2)
        // (SO_PEERCRED, SO_PEERPIDFD), and no one can forge that.
        let sender = MessagePort.Sender(credentials, pin: credentials.pid == connector.pid ? connector.pin : nil)
        let hello: Handshake
        do { hello = try Handshake.decode(record.bytes, expecting: .hello) } catch {
            return refused(.handshakeFailed(error), sender: sender)
        }
        guard case .hello(let wanted) = hello, wanted == name.bytes else {
            try? socket.send(Handshake.unknownName.encode())
            return refused(.handshakeFailed(.wrongName), sender: sender)
        }
        // Both the process that connected and the one that said HELLO must be admitted.
        guard access.admits(sender), access.admits(connector) else {
            try? socket.send(Handshake.denied.encode())
            return refused(.accessDenied, sender: sender)
        }
        // Credentials naming another process than the one that connected were forged: with
        // CAP_SYS_ADMIN (§3.32), or from a user and pid namespace the connector made, naming one
        // of its descendants (§3.61). The report names what was claimed and who connected.
        if credentials.pid != connector.pid {
            try? socket.send(Handshake.denied.encode())
            return refused(.forgedCredentials, sender: sender)
        }
        if connectionsByUser[connector.uid, default: 0] >= limits.connectionsPerUser {
            try? socket.send(Handshake.tooManyConnections.encode())
            return refused(.tooManyConnections, sender: sender)
        }
        do {
            try socket.send(Handshake.welcome.encode())
        } catch {
            return .closedQuietly
        }
        return .accepted(PortConnection(accepted: socket, access: access, connector: connector))
    }

    /// The process that connected `socket`, as the kernel recorded it at connect(2) (SO_PEERCRED),
    /// pinned by SO_PEERPIDFD where the kernel can (Linux 6.5+; a connector already reaped is
    /// unpinned before 6.16). Nil when the kernel says nothing (the socket failed).
    private static func connector(of socket: SeqPacketSocket) -> MessagePort.Sender? {
        guard let credentials = socket.peerCredentials else { return nil }
        let process = try? socket.peerProcess()
        return MessagePort.Sender(credentials, pin: process.map { PinnedProcess(adopting: $0, pid: credentials.pid) })
    }

    private func timerFired() {
        guard let port else { return }
        timer.drain()
        let now = ContinuousClock.now
        let (expired, resume): ([Pending], Bool) = state.withLock { state in
            guard !state.closed else { return ([], false) }
            let expired = state.pending.values.filter { $0.deadline <= now }
            for pending in expired { state.pending[pending.socket.descriptor.rawValue] = nil }
            let resume = state.acceptPaused
            state.acceptPaused = false
            return (expired, resume)
        }
        for pending in expired { finish(pending, of: port, reporting: .handshakeFailed(.timedOut)) }
        if resume {
            for registration in listenerSource.source1Registrations {
                port.membership.loop?.addRegistration(registration, for: port) {
                    state.withLock { !$0.closed && !$0.acceptPaused }
                }
            }
        }
        rearmTimer()
    }

    private func pauseAccepting(of port: MessagePort) {
        let paused: Bool = state.withLock { state in
            guard !state.closed, !state.acceptPaused else { return false }
            state.acceptPaused = true
            timer.arm(at: .now + Self.exhaustionPause)
            return true
        }
        guard paused else { return }
        for registration in listenerSource.source1Registrations {
            port.membership.loop?.removeRegistration(registration, for: port)
        }
    }

    /// Arms the timer for the earliest HELLO deadline (or disarms it), unless accepting is
    /// paused, which keeps its own earlier wake-up.
    private func rearmTimer() {
        state.withLock { state in
            guard !state.closed, !state.acceptPaused else { return }
            timer.arm(at: state.pending.values.map(\.deadline).min())
        }
    }

    /// Drops a connection taken out of `pending`: unregisters, closes, reports with the process
    /// that connected.
    private func finish(_ pending: Pending, of port: MessagePort, reporting error: PortError) {
        unregister(pending, from: port)
        let connector = Self.connector(of: pending.socket)
        pending.socket.close()
        report(MessagePort.TransportReport(error: error, connector: connector), to: port)
    }

    /// Reports through the port's handler unless the throttle leaves it out.
    private func report(_ report: MessagePort.TransportReport, to port: MessagePort) {
        if let admitted = reports.admit(report) { port.reportTransportError(admitted) }
    }

    private func unregister(_ pending: Pending, from port: MessagePort) {
        pending.source.invalidate()
        for registration in pending.source.source1Registrations {
            port.membership.loop?.removeRegistration(registration, for: port)
        }
    }

    // MARK: - Any thread

    /// Frees the name: unregisters every descriptor from `loop`, then closes them.
    func close(unregisteringFrom loop: ThreadRunLoop?, for port: MessagePort) {
        let registrations = self.registrations
        let pending: [Pending]? = state.withLock { state in
            guard !state.closed else { return nil }
            state.closed = true
            defer { state.pending = [:] }
            return Array(state.pending.values)
        }
        guard let pending else { return }
        if let address { OwnReturns.stoppedListening(at: address) }
        listenerSource.invalidate()
        timerSource.invalidate()
        for entry in pending { entry.source.invalidate() }
        for registration in registrations { loop?.removeRegistration(registration, for: port) }
        listener.close()
        timer.close()
        for entry in pending { entry.socket.close() }
    }

    /// Closes every descriptor without unregistering (the port is being deallocated, so no
    /// loop holds it any more).
    func close() {
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            if let address { OwnReturns.stoppedListening(at: address) }
            listener.close()
            timer.close()
            for entry in state.pending.values { entry.socket.close() }
            state.pending = [:]
        }
    }
}

/// Lets the listener's own sources call back into it without a retain cycle.
private final class WeakListener: @unchecked Sendable {
    weak var listener: NameListener?
}

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

    init(socket: SeqPacketSocket, serverThread: ThreadID, onClose: @escaping @Sendable () -> Void) {
        self.socket = socket
        self.serverThread = serverThread
        self.onClose = onClose
    }

    func start(on loop: ThreadRunLoop) {
        let source = FileDescriptorSource(fileDescriptor: socket.descriptor.rawValue, events: .readable) { [self] _, _ in
            readRequest()
        }
        source.label = "introspection client"
        self.source = source
        loop.add(source, forMode: .default)
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
        source?.invalidate()
        source = nil
        socket.close()
        onClose()
    }
}

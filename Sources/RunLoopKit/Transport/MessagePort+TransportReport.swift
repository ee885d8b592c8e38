extension MessagePort {
    /// A frame, connection or handshake that the port refused or dropped, and who sent it, so
    /// that a daemon can log its attacker (a logging adapter turns these into log records).
    ///
    /// `sender` is what the kernel reported with the record that was refused — a frame or a
    /// HELLO — and `connector` the process that made a named connection. They differ when a
    /// connection was handed on, and for a forged frame (`.forgedCredentials`), whose `sender`
    /// claims to be this process while `connector` is the process that really connected.
    public struct TransportReport: Sendable, CustomStringConvertible {
        /// What was refused or went wrong: `.malformedFrame`, `.handshakeFailed`, `.accessDenied`,
        /// `.forgedCredentials`, `.portsRefused`, `.tooManyConnections`, `.resourceExhausted`,
        /// `.messageTooLarge` (a message past `maximumIncomingDataSize`).
        /// Any thread; free.
        public var error: PortError
        /// The process that sent the refused frame or handshake record, as the kernel reported it
        /// with that record, pinned where the kernel could (`Sender.process`); nil when no record
        /// was read (a silent connection, one crowded out, the port out of descriptors) or it
        /// came without credentials. Any thread; free.
        public var sender: Sender?
        /// The process that connected, for a connection made through a published name
        /// (SO_PEERCRED, pinned with SO_PEERPIDFD where the kernel can); nil for the send rights
        /// the port handed out itself, which any holder may use. Any thread; free.
        public var connector: Sender?
        /// How many reports about a published name's handshakes and named connections were left
        /// out just before this one: in each interval of 10 s the first 10 go out in full and the
        /// rest are only counted, so that a flood of refused peers cannot flood the log. 0 for
        /// the others. Any thread; free.
        public var suppressed: Int = 0

        /// A report. Any thread; free.
        public init(error: PortError, sender: Sender? = nil, connector: Sender? = nil) {
            self.error = error
            self.sender = sender
            self.connector = connector
        }

        /// The error, then who sent it and who connected, each with its pinned process when
        /// known: "access denied …; sent by pid 12, uid 1000, gid 1000 (process 12 (running))".
        /// Any thread; a poll(2) per pinned process, and the string.
        public var description: String {
            var text = error.description
            if let sender { text += "; sent by \(Self.describe(sender))" }
            if let connector, connector != sender {
                text += "; connected by \(Self.describe(connector))"
            }
            if suppressed > 0 { text += "; \(suppressed) more reports of refused peers were left out before this one" }
            return text
        }

        private static func describe(_ sender: Sender) -> String {
            sender.process.map { "\(sender) (\($0))" } ?? "\(sender) (not pinned)"
        }
    }

    /// Sets a closure told about every frame, connection and handshake the port refused or
    /// dropped, with who sent it (`TransportReport`). It runs on the receiving loop's thread.
    /// Without one, a line goes to stderr. Replaces a handler set with
    /// `setTransportErrorHandler(_:)`, which is told the error alone. Any thread; a lock.
    public func setTransportReportHandler(_ handler: (@Sendable (TransportReport) -> Void)?) {
        lock.withLock { state.transportErrorHandler = handler }
    }
}

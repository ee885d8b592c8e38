#if Logging
import Logging
import RunLoopKit

/// Turns RunLoopKit's loop-health reports — slow callouts, hangs — and ports' transport-error
/// reports into swift-log records, with the loop's thread name, the callout's label and, for a
/// refused peer, its identity as metadata.
///
/// ```swift
/// let health = LoopHealthLogger(logger: Logger(label: "com.example.daemon.loops"))
/// health.reportSlowCallouts(of: worker.runLoop, threshold: .milliseconds(100))
/// let hangs = health.makeHangWatch(loops: [.main, worker.runLoop], threshold: .seconds(1))
/// health.reportTransportErrors(of: service)
/// ```
///
/// The levels follow swift-log's guidance for libraries (info or less severe; warning and above
/// only for one-time conditions): a hang — a loop stuck past its threshold, reported once per
/// stall — is `info`; a slow callout, which can recur with every message, and a dropped
/// connection, which a hostile or merely buggy peer can repeat at will, are `debug`. An
/// application that wants them louder says so with `levels`.
///
/// A value type; any thread. Each record costs what the logger's handler makes of it, plus
/// building its metadata (a few strings) — only when the logger's level lets it through.
public struct LoopHealthLogger: Sendable {
    /// The level of each kind of record.
    public struct Levels: Sendable, Equatable {
        /// A callout that ran at least its loop's threshold. Default `.debug`.
        public var slowCallout: Logger.Level
        /// A loop stuck in one callout or pass past the watch's threshold. Default `.info`.
        public var hang: Logger.Level
        /// A port dropped a connection (malformed frame, refused peer, …). Default `.debug`.
        public var transportError: Logger.Level

        /// Levels for each kind of record; the defaults are the library levels above. Any thread; free.
        public init(slowCallout: Logger.Level = .debug, hang: Logger.Level = .info, transportError: Logger.Level = .debug) {
            self.slowCallout = slowCallout
            self.hang = hang
            self.transportError = transportError
        }
    }

    /// Where the records go.
    public var logger: Logger
    /// The level of each kind of record.
    public var levels: Levels

    /// A logger of loop-health records. Any thread; free.
    public init(logger: Logger, levels: Levels = Levels()) {
        self.logger = logger
        self.levels = levels
    }

    // MARK: - Records

    /// Logs `callout`, which ran on `loop` for `callout.duration`. Any thread (a slow-callout
    /// handler calls it on the loop's thread).
    public func logSlowCallout(_ callout: ThreadRunLoop.Callout, on loop: ThreadRunLoop) {
        logger.log(level: levels.slowCallout, "slow callout", metadata: metadata(loop, callout))
    }

    /// Logs that `loop` is stuck, in `callout` (nil: in its pass, between callouts). Any thread
    /// (a `HangWatch` calls it on its own thread).
    public func logHang(of loop: ThreadRunLoop, in callout: ThreadRunLoop.Callout?) {
        var metadata = metadata(loop, callout)
        if callout == nil { metadata["callout"] = "none" }
        logger.log(level: levels.hang, "run loop stuck", metadata: metadata)
    }

    /// Logs what `port` refused or dropped (`report`): the error, the port's label, and who did
    /// it as the kernel reported it — `peer.*` for the process that sent the refused frame or
    /// handshake, `connector.*` for the process that made the named connection when that is
    /// another one, each with whether it is pinned by a pidfd. Any thread (a port's transport
    /// report handler calls it on the port's loop's thread).
    public func logTransportReport(_ report: MessagePort.TransportReport, on port: MessagePort) {
        var metadata: Logger.Metadata = ["port.error": "\(report.error)"]
        if let label = port.label { metadata["port.label"] = "\(label)" }
        if let sender = report.sender { Self.add(sender, as: "peer", to: &metadata) }
        if let connector = report.connector, connector != report.sender { Self.add(connector, as: "connector", to: &metadata) }
        logger.log(level: levels.transportError, "port dropped a connection", metadata: metadata)
    }

    // MARK: - Wiring

    /// Logs every callout of `loop` that runs at least `threshold`: sets the loop's slow-callout
    /// handler (replacing any other). Any thread; as `setSlowCalloutHandler`.
    public func reportSlowCallouts(of loop: ThreadRunLoop, threshold: Duration) {
        loop.setSlowCalloutHandler(threshold: threshold) { [self, unowned loop] callout in
            logSlowCallout(callout, on: loop)
        }
    }

    /// A `HangWatch` over `loops` that logs each hang. Keep it for as long as the loops are to
    /// be watched. Any thread; starts the watch's thread.
    public func makeHangWatch(loops: [ThreadRunLoop], threshold: Duration) -> HangWatch {
        HangWatch(loops: loops, threshold: threshold) { loop, callout in logHang(of: loop, in: callout) }
    }

    /// Logs what `port` refuses or drops: sets its transport report handler (replacing any
    /// other). Any thread; a lock.
    public func reportTransportErrors(of port: MessagePort) {
        port.setTransportReportHandler { [self, weak port] report in
            guard let port else { return }
            logTransportReport(report, on: port)
        }
    }

    private static func add(_ process: MessagePort.Sender, as prefix: String, to metadata: inout Logger.Metadata) {
        metadata["\(prefix).pid"] = "\(process.pid)"
        metadata["\(prefix).uid"] = "\(process.uid)"
        metadata["\(prefix).gid"] = "\(process.gid)"
        metadata["\(prefix).pinned"] = process.process == nil ? "false" : "true"
    }

    private func metadata(_ loop: ThreadRunLoop, _ callout: ThreadRunLoop.Callout?) -> Logger.Metadata {
        var metadata: Logger.Metadata = ["thread": "\(loop.threadName)", "thread.id": "\(loop.threadID)"]
        guard let callout else { return metadata }
        metadata["callout.kind"] = "\(callout.kind)"
        if let label = callout.label { metadata["callout.label"] = "\(label)" }
        metadata["callout.mode"] = "\(callout.mode.rawValue)"
        if let msgid = callout.msgid { metadata["callout.msgid"] = "\(msgid)" }
        let tenths = callout.duration / .microseconds(100)
        metadata["callout.duration_ms"] = "\(Int(tenths) / 10).\(Int(tenths) % 10)"
        return metadata
    }
}
#endif

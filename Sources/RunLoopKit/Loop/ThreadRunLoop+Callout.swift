extension ThreadRunLoop {
    /// One callout of a loop — a Source0's perform, a timer's or observer's handler, one port
    /// message, an fd or signal source's handler, a block, an executor job, a main-queue drain —
    /// as loop-health reports describe it: what ran, in which mode, when, and for how long.
    ///
    /// A slow-callout handler (`setSlowCalloutHandler(threshold:_:)`) receives one after the
    /// callout returned, with its whole duration; a `HangWatch` receives the one a stuck loop is
    /// inside, with its duration so far.
    public struct Callout: Sendable, CustomStringConvertible {
        /// What kind of item the loop called out to.
        public enum Kind: Sendable, Equatable, Hashable, CaseIterable, CustomStringConvertible {
            /// A `RunLoopSource`'s perform.
            case source
            /// A `RunLoopTimer`'s handler (also `perform(after:)` blocks).
            case timer
            /// A `RunLoopObserver`'s handler.
            case observer
            /// One message delivered to a `MessagePort`'s handler or delegate (or, for a proxy
            /// whose owner went away, its invalidation).
            case port
            /// A `FileDescriptorSource`'s handler.
            case fileDescriptor
            /// A block queued with `perform(inModes:_:)` or `ResidentThread.perform`.
            case block
            /// A Swift concurrency job of the loop's `executor`.
            case job
            /// A drain of the main dispatch queue (main loop only).
            case mainQueue
            /// A `SignalSource`'s handler.
            case signal
            /// A `ProcessExitSource`'s handler.
            case processExit

            /// "source", "timer", "observer", "port", "fd", "block", "job", "main queue",
            /// "signal" or "process exit". Any thread; free.
            public var description: String {
                switch self {
                case .source: "source"
                case .timer: "timer"
                case .observer: "observer"
                case .port: "port"
                case .fileDescriptor: "fd"
                case .block: "block"
                case .job: "job"
                case .mainQueue: "main queue"
                case .signal: "signal"
                case .processExit: "process exit"
                }
            }
        }

        /// What ran.
        public var kind: Kind
        /// The item's label; nil for blocks, jobs and unlabelled items.
        public var label: String?
        /// The mode the loop was running.
        public var mode: Mode
        /// The message's msgid, for port callouts.
        public var msgid: UInt32?
        /// When the callout began (read just before it).
        public var started: ContinuousClock.Instant
        /// How long it ran: to just after it returned (a slow-callout report, at least as long
        /// as the callout ran) or to the moment of the report (a hang, which has not returned).
        public var duration: Duration

        /// A callout description, as the loop builds them (for tests of code that consumes
        /// reports). Any thread; free.
        public init(kind: Kind, label: String? = nil, mode: Mode, msgid: UInt32? = nil,
                    started: ContinuousClock.Instant, duration: Duration) {
            self.kind = kind
            self.label = label
            self.mode = mode
            self.msgid = msgid
            self.started = started
            self.duration = duration
        }

        /// `port "requests" msgid 7 in default: 2503.1 ms`. Any thread; allocates the string.
        public var description: String {
            var text = kind.description
            if let label { text += " \"\(label)\"" }
            if let msgid { text += " msgid \(msgid)" }
            return text + " in \(mode.rawValue): \(Self.milliseconds(duration))"
        }

        /// A duration as milliseconds with one decimal ("2503.1 ms").
        static func milliseconds(_ duration: Duration) -> String {
            let tenths = duration.nanoseconds / 100_000
            return "\(tenths / 10).\(abs(tenths % 10)) ms"
        }
    }

    /// Reports, on the loop's thread, each callout that ran at least `threshold`: once, after the
    /// callout returned and before the loop sleeps, with its kind, label, mode, msgid (ports) and
    /// a duration at least as long as it ran (Guarantees §3.36). Shorter callouts are not reported;
    /// `threshold: .zero` reports every callout (e.g. to feed a histogram). A nil `handler`
    /// removes the handler. Callouts that began before the handler was set are not timed.
    ///
    /// Cost: without a handler (and without a `HangWatch`), none — a callout reads no clock and
    /// takes no lock, one predictable branch. With one, two reads of the CPU's time-stamp counter
    /// per callout where the kernel keeps time with it (x86-64, clocksource "tsc") and the
    /// threshold is 1 ms or more, else two clock reads (vDSO); a callout that may have reached the
    /// threshold costs a clock read more, to convert its ticks. A tick-timed duration is rounded
    /// up, by at most 0.2 % and a few microseconds: a callout that ran the threshold is always
    /// reported, one that fell that little short of it may be. A report takes a lock and reads
    /// the item's label. The handler runs on the loop's thread, between its other callouts: keep
    /// it short. Any thread; a lock.
    public func setSlowCalloutHandler(threshold: Duration, _ handler: (@Sendable (Callout) -> Void)?) {
        precondition(threshold >= .zero, "setSlowCalloutHandler(threshold: \(threshold)): the threshold must not be negative")
        health.setSlowCalloutHandler(handler.map { (threshold.nanoseconds, $0) }, flags: healthFlags)
    }

    // MARK: - The callout hook

    /// The one place a pass calls out to an item (CF's __CFRUNLOOP_IS_CALLING_OUT_TO_… frames):
    /// every Source0 perform, timer, observer, port message, fd or signal source, block, job and
    /// main-queue drain goes through it. Without a slow-callout handler, a hang watch or an
    /// attached `runloopctl trace` (all three bits of the one flags load) it costs one relaxed load, one predictable branch and the count of returned callouts (a
    /// load and a store: `Statistics.callouts`); otherwise the callout is timed and,
    /// for a watch, published (`LoopHealth`), for a trace, recorded (`TraceRecorders`). Loop
    /// thread only.
    @inline(__always)
    func callout<Result>(_ kind: Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32? = nil,
                         _ body: () -> Result) -> Result {
        let flags = healthFlags.load(ordering: .relaxed)
        if _fastPath(flags == 0) {
            let result = body()
            LoopCounters.add(1, to: counters.callouts)
            return result
        }
        let timing = calloutBegins(kind, item, msgid: msgid, flags: flags)
        let result = body()
        calloutEnded(timing, kind, item, msgid: msgid, flags: flags)
        return result
    }

    /// `callout` handing `argument` to `body` borrowed: a port message reaches its handler without
    /// the copy (a retain and a release of each of its references) that capturing it in the closure
    /// cost. The same hook, at the same cost. Loop thread only.
    @inline(__always)
    func callout<Argument: ~Copyable, Result>(_ kind: Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32? = nil,
                                              with argument: borrowing Argument,
                                              _ body: (borrowing Argument) -> Result) -> Result {
        let flags = healthFlags.load(ordering: .relaxed)
        if _fastPath(flags == 0) {
            let result = body(argument)
            LoopCounters.add(1, to: counters.callouts)
            return result
        }
        let timing = calloutBegins(kind, item, msgid: msgid, flags: flags)
        let result = body(argument)
        calloutEnded(timing, kind, item, msgid: msgid, flags: flags)
        return result
    }

    /// `callout` for one message delivered to `port`'s handler or delegate: the same hook, plus
    /// `runloopctl monitor`'s and `trace`'s, which costs one relaxed load while neither is attached
    /// (`MessageMonitors`). Loop thread only.
    @inline(__always)
    func callout<Result>(_ kind: Callout.Kind, _ port: MessagePort, msgid: UInt32?,
                         with message: borrowing MessagePort.Message,
                         _ body: (borrowing MessagePort.Message) -> Result) -> Result {
        if _slowPath(MessageMonitors.active.load(ordering: .relaxed)) { MessageMonitors.delivered(port, message) }
        return callout(kind, port as (any CalloutItem)?, msgid: msgid, with: message, body)
    }

    /// What a timed callout's end needs of its start.
    struct CalloutTiming {
        var started: CalloutStamp
        /// The record to publish again when the callout returns (watched loops only).
        var previous: CalloutRecord?
        /// CLOCK_BOOTTIME nanoseconds at the start, for `runloopctl trace`; 0 when not traced.
        var traceBegan: Int64
    }

    /// A callout begins while a slow-callout handler or a hang watch is set: its start is read
    /// and, for a watch, published. Out of line, and the body stays in the caller: handed to a
    /// function that times it, a closure's captures were retained and released once per callout.
    @inline(never)
    private func calloutBegins(_ kind: Callout.Kind, _ item: (any CalloutItem)?, msgid: UInt32?,
                               flags: UInt8) -> CalloutTiming {
        if flags & HealthFlags.timed != 0 { LoopCounters.add(1, to: counters.timedCallouts) }
        let started = CalloutStamp.now(cycles: flags & HealthFlags.cycleCounter != 0)
        let previous = flags & HealthFlags.watched != 0
            ? health.enterCallout(kind, item, msgid: msgid, started: started) : nil
        let traceBegan = flags & HealthFlags.traced != 0 ? LoopInstant.now.nanoseconds : 0
        return CalloutTiming(started: started, previous: previous, traceBegan: traceBegan)
    }

    /// The timed callout returned: the watch's record is restored and a slow callout reported.
    @inline(never)
    private func calloutEnded(_ timing: CalloutTiming, _ kind: Callout.Kind, _ item: (any CalloutItem)?,
                              msgid: UInt32?, flags: UInt8) {
        LoopCounters.add(1, to: counters.callouts)
        if let previous = timing.previous {
            health.leaveCallout(restoring: previous, lightBarrier: flags & HealthFlags.lightBarrier != 0)
        }
        if flags & HealthFlags.slowCallouts != 0 {
            health.reportIfSlow(kind, item, msgid: msgid, started: timing.started)
        }
        if timing.traceBegan != 0 {
            TraceRecorders.callout(kind, label: item?.label, mode: health.calloutMode, msgid: msgid, thread: owner,
                                   began: timing.traceBegan, ended: LoopInstant.now.nanoseconds)
        }
    }

    // MARK: - Pass boundaries, for hang watches

    /// A pass begins (or a nested invocation begins or ends): the loop is making progress.
    @inline(__always)
    func healthBoundary() {
        if _slowPath(healthFlags.load(ordering: .relaxed) & HealthFlags.watched != 0) {
            health.markBusy()
        }
    }

    /// The loop comes back from its wait (or its outermost invocation begins).
    @inline(__always)
    func healthWoke() {
        let flags = healthFlags.load(ordering: .relaxed)
        if _slowPath(flags & HealthFlags.watched != 0) {
            health.markWoke(lightBarrier: flags & HealthFlags.lightBarrier != 0)
        }
    }

    /// The loop goes to sleep in its wait (or its outermost invocation ends).
    @inline(__always)
    func healthIdle() {
        if _slowPath(healthFlags.load(ordering: .relaxed) & HealthFlags.watched != 0) { health.markIdle() }
    }
}

/// An item whose callouts carry a label in loop-health reports.
protocol CalloutItem: AnyObject {
    var label: String? { get }
}

extension RunLoopSource: CalloutItem {}
extension RunLoopTimer: CalloutItem {}
extension RunLoopObserver: CalloutItem {}
extension FileDescriptorSource: CalloutItem {}
extension MessagePort: CalloutItem {}

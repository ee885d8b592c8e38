#if Metrics
import CoreMetrics
import RunLoopKit

/// Records how long callouts run, as a swift-metrics `Timer` (a histogram in most backends) per
/// loop thread, callout kind and item label: `<prefix>_callout_duration` with the dimensions
/// `("thread", name)`, `("kind", kind)` and `("label", label)` (empty for blocks, jobs and
/// unlabelled items).
///
/// ```swift
/// let durations = CalloutDurations()
/// durations.recordCallouts(of: worker.runLoop)        // every callout of the worker's loop
/// ```
///
/// Only asked-for loops pay: recording installs the loop's slow-callout handler with a zero
/// threshold, so each callout is timed (two clock reads) and reported; each report takes this
/// object's lock, looks its timer up and records one value. A loop has one slow-callout handler:
/// `recordCallouts(of:handingOnSlowerThan:to:)` passes the callouts of at least a threshold on
/// to another handler (a log, say).
public final class CalloutDurations: Sendable {
    /// The factory the timers are created with. Any thread; free.
    public let factory: any MetricsFactory
    /// The first part of the timer's label. Any thread; free.
    public let labelPrefix: String

    private struct Key: Hashable {
        var thread: String
        var kind: ThreadRunLoop.Callout.Kind
        var label: String?
    }
    private let timers = Locked<[Key: CoreMetrics.Timer]>([:])

    /// A recorder creating its timers with `factory` (by default the one
    /// `MetricsSystem.bootstrap` installed). Any thread; free.
    public init(factory: any MetricsFactory = MetricsSystem.factory, labelPrefix: String = "runloopkit") {
        self.factory = factory
        self.labelPrefix = labelPrefix
    }

    /// Records `callout`'s duration under the thread `threadName`. Any thread; a lock, and on a
    /// new (thread, kind, label) creating its timer.
    public func record(_ callout: ThreadRunLoop.Callout, threadName: String) {
        let key = Key(thread: threadName, kind: callout.kind, label: callout.label)
        let timer = timers.withLock { timers in
            if let timer = timers[key] { return timer }
            let timer = CoreMetrics.Timer(label: "\(labelPrefix)_callout_duration",
                                          dimensions: [("thread", threadName), ("kind", "\(callout.kind)"),
                                                       ("label", callout.label ?? "")],
                                          factory: factory)
            timers[key] = timer
            return timer
        }
        let (seconds, attoseconds) = callout.duration.components
        timer.recordNanoseconds(seconds >= Int64.max / 1_000_000_000 ? .max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Records every callout of `loop` from now on, under the loop's thread name as it is now;
    /// those that ran at least `threshold` are also handed to `slow`. Sets the loop's
    /// slow-callout handler (replacing any other); `loop.setSlowCalloutHandler(threshold:_:)`
    /// with nil stops it. Any thread.
    public func recordCallouts(of loop: ThreadRunLoop, handingOnSlowerThan threshold: Duration = .zero,
                               to slow: (@Sendable (ThreadRunLoop.Callout) -> Void)? = nil) {
        let threadName = loop.threadName
        loop.setSlowCalloutHandler(threshold: .zero) { [self] callout in
            record(callout, threadName: threadName)
            if let slow, callout.duration >= threshold { slow(callout) }
        }
    }
}
#endif

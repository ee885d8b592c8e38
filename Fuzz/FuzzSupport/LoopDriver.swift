import RunLoopKit

/// Runs the calling thread's loop in the fuzz targets' private mode until `condition` holds.
/// An observer checks it each time the loop is about to sleep — once everything ready was
/// handled — and stops the loop then, so the loop never sleeps past the event waited for (a
/// dropped connection is not a handled source, so `returnAfterSourceHandled` cannot end the
/// run). Ten seconds without the condition is a hang, reported naming `what` (libFuzzer's own
/// -timeout would name nothing).
public enum LoopDriver {
    public static let mode: ThreadRunLoop.Mode = "RunLoopKit.fuzz"

    /// Runs the mode once without waiting, after a target set up its ports: what the loop
    /// makes on a mode's first run (its epoll set) is then there before the first input's
    /// descriptors are counted.
    public static func prepare() {
        ThreadRunLoop.current.run(mode: mode, for: .zero, returnAfterSourceHandled: false)
    }

    public static func run(until condition: @escaping @Sendable () -> Bool, _ what: @autoclosure () -> String) {
        guard !condition() else { return }
        let loop = ThreadRunLoop.current
        let observer = RunLoopObserver(activities: .beforeWaiting) { _, _ in
            if condition() { ThreadRunLoop.current.stop() }
        }
        loop.add(observer, forMode: mode)
        defer { observer.invalidate() }
        let result = loop.run(mode: mode, for: .seconds(10), returnAfterSourceHandled: false)
        guard result == .stopped, condition() else { fuzzFailure("\(result) after waiting for \(what())") }
    }
}

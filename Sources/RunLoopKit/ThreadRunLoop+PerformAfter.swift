extension ThreadRunLoop {
    /// Runs `block` on the loop's thread `delay` from now, while the loop runs one of `modes`
    /// (`.common`: any common mode): a one-shot timer, the seeds' `performSelector:afterDelay:`.
    /// Like any timer it never counts as a handled source; invalidating the returned timer
    /// cancels the block (`cancelPreviousPerformRequests`). A delay too large for the clock
    /// means never. Any thread; a timer and one wake-up.
    @discardableResult
    public func perform(after delay: Duration, inModes modes: [Mode] = [.default],
                        _ block: @escaping @Sendable () -> Void) -> RunLoopTimer {
        let timer = RunLoopTimer(fireAt: Self.deadline(after: delay) ?? Self.distantFuture) { _ in block() }
        for mode in modes { add(timer, forMode: mode) }
        return timer
    }

    /// An instant no timer reaches: a thousand years from now.
    static var distantFuture: ContinuousClock.Instant { .now.advanced(by: .seconds(31_557_600_000)) }
}

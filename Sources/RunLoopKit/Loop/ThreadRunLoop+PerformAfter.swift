extension ThreadRunLoop {
    /// Runs `block` on the loop's thread `delay` from now, while the loop runs one of `modes`
    /// (`.common`: any common mode): a one-shot timer, the seeds' `performSelector:afterDelay:`.
    /// Like any timer it never counts as a handled source; invalidating the returned timer
    /// cancels the block (`cancelPreviousPerformRequests`). A delay beyond the clock's range
    /// (about 292 years) saturates there: never, in practice. Any thread; a timer and one wake-up.
    @discardableResult
    public func perform(after delay: Duration, inModes modes: [Mode] = defaultModes,
                        _ block: @escaping @Sendable () -> Void) -> RunLoopTimer {
        let timer = RunLoopTimer(fireAt: LoopInstant.now.advanced(by: delay).instant) { _ in block() }
        for mode in modes { add(timer, forMode: mode) }
        return timer
    }
}

extension ThreadRunLoop {
    /// Adds a Source0 to `mode` (`.common`: every common mode, now and later). Adding it twice is
    /// a no-op. Any thread; its schedule callout runs on the calling thread for each mode it enters.
    public func add(_ source: RunLoopSource, forMode mode: Mode) { addItem(source, mode) }
    /// Removes a Source0 from `mode`; its cancel callout runs on the calling thread. Any thread.
    public func remove(_ source: RunLoopSource, forMode mode: Mode) { removeItem(source, mode) }

    /// Adds a timer to `mode`. A timer belongs to one loop at most. Any thread; wakes the loop
    /// so it re-arms its wait.
    public func add(_ timer: RunLoopTimer, forMode mode: Mode) { addItem(timer, mode) }
    /// Removes a timer from `mode` without invalidating it. Any thread.
    public func remove(_ timer: RunLoopTimer, forMode mode: Mode) { removeItem(timer, mode) }

    /// Adds an observer to `mode`. An observer belongs to one loop at most. Any thread.
    public func add(_ observer: RunLoopObserver, forMode mode: Mode) { addItem(observer, mode) }
    /// Removes an observer from `mode`. Any thread.
    public func remove(_ observer: RunLoopObserver, forMode mode: Mode) { removeItem(observer, mode) }

    /// Makes this loop the receiver of `port` in `mode`. A port is received by one loop at most:
    /// scheduling it on a second loop is a precondition failure. Any thread; one epoll_ctl.
    public func add(_ port: MessagePort, forMode mode: Mode) { addItem(port, mode) }
    /// Stops receiving `port` in `mode`; its messages stay queued. Any thread; one epoll_ctl.
    public func remove(_ port: MessagePort, forMode mode: Mode) { removeItem(port, mode) }

    /// Watches a file descriptor in `mode` (level-triggered). Any thread; one epoll_ctl.
    public func add(_ source: FileDescriptorSource, forMode mode: Mode) { addItem(source, mode) }
    /// Stops watching a file descriptor in `mode`. Any thread; one epoll_ctl.
    public func remove(_ source: FileDescriptorSource, forMode mode: Mode) { removeItem(source, mode) }

    // MARK: - Bookkeeping shared by every item kind

    private func addItem<T: RunLoopItem>(_ item: T, _ mode: Mode) {
        guard item.attach(to: self) else { return }
        let addedTo: [Mode] = state.withLock { state in
            let targets: [Mode]
            if mode == .common {
                guard state.commonItems.insert(item) else { return [] }
                targets = Array(state.commonModes)
            } else {
                targets = [mode]
            }
            return targets.filter { state.modeState(for: $0, wakeDoorbell: wakeDoorbell).insert(item) }
        }
        for addedMode in addedTo { item.didSchedule(in: self, mode: addedMode) }
        if !item.isValid {
            // Invalidated while being added: it must not stay behind in this loop.
            removeEverywhere(item)
        } else if !addedTo.isEmpty {
            // A new timer may be due before the current wake-up time.
            wakeUp()
        }
    }

    private func removeItem<T: RunLoopItem>(_ item: T, _ mode: Mode) {
        let (removedFrom, stillHere): ([Mode], Bool) = state.withLock { state in
            let targets: [Mode]
            if mode == .common {
                guard state.commonItems.remove(item) else { return ([], state.contains(item)) }
                targets = Array(state.commonModes)
            } else {
                targets = [mode]
            }
            let removed = targets.filter { state.modes[$0]?.remove(item) ?? false }
            return (removed, state.contains(item))
        }
        finishRemoval(of: item, from: removedFrom, stillHere: stillHere)
    }

    /// Removes `item` from every mode and from the common set (invalidation, thread exit).
    func removeEverywhere(_ item: any RunLoopItem) {
        let removedFrom: [Mode] = state.withLock { state in
            _ = state.commonItems.remove(item)
            return state.modes.values.filter { $0.remove(item) }.map(\.mode)
        }
        finishRemoval(of: item, from: removedFrom, stillHere: false)
    }

    private func finishRemoval(of item: any RunLoopItem, from modes: [Mode], stillHere: Bool) {
        for removedMode in modes { item.didCancel(in: self, mode: removedMode) }
        if !stillHere { item.detach(from: self) }
        // The mode may now be empty, or wait for less: a sleeping loop must re-evaluate (§3.9).
        if !modes.isEmpty { wakeUp() }
    }
}

extension ThreadRunLoop {
    /// Registers one more descriptor of an item already scheduled on this loop, in every mode
    /// that holds it (a port that gained a connection after it was added).
    /// `stillWanted` is checked under the loop's lock, which orders it against `removeRegistration`.
    func addRegistration(_ registration: Source1Registration, for item: AnyObject, if stillWanted: () -> Bool) {
        let registered = state.withLock { state in
            guard stillWanted() else { return false }
            for modeState in state.modes(holding: item) { modeState.register(registration) }
            return true
        }
        // A loop asleep on its futex (its mode had nothing the kernel watches) must go round
        // and sleep in epoll, which now has a descriptor to watch.
        if registered { wakeUp() }
    }

    /// Unregisters one descriptor of an item from every mode that holds it (a port dropping a
    /// connection), before the descriptor is closed.
    func removeRegistration(_ registration: Source1Registration, for item: AnyObject) {
        state.withLock { state in
            for modeState in state.modes(holding: item) { modeState.unregister(registration) }
        }
    }
}

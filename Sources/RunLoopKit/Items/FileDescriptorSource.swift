import Synchronization

/// A Source1 over any file descriptor: the loop calls the handler on its thread when the
/// descriptor is readable and/or writable (level-triggered, like poll(2)). It belongs to one
/// loop at most and never closes the descriptor. What it waits for can change while it is
/// scheduled (`events`), as a connection's source asks for `.writable` only while output is
/// queued.
///
/// Error and hang-up conditions are reported as both readable and writable, so the handler's
/// next read or write sees the error. A descriptor epoll cannot watch (a regular file,
/// /dev/null) is reported ready at once, for the events the source asks for, in every pass
/// while the source is scheduled — as poll(2) reports it — and the loop polls instead of
/// sleeping meanwhile. Several sources may watch one descriptor, in one mode or several;
/// each event goes to every source whose events it matches, in ascending `order`. Adding a
/// source over a closed descriptor is a precondition failure.
public final class FileDescriptorSource: Sendable, SingleLoopItem, CustomStringConvertible {
    /// The readiness a source waits for and reports.
    public struct Events: OptionSet, Sendable, Hashable {
        /// The events' bits. Any thread; free.
        public let rawValue: UInt8
        /// Events from their bits. Any thread; free.
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        /// Data (or end of file, or an error) can be read without blocking. Any thread; free.
        public static let readable = Events(rawValue: 1 << 0)
        /// Data can be written without blocking. Any thread; free.
        public static let writable = Events(rawValue: 1 << 1)
    }

    /// The watched descriptor (owned by the caller). Any thread; free.
    public let fileDescriptor: Int32
    /// `events`' bits. A change racing an `add` on another thread is ordered by locks, not by
    /// this atomic: the setter stores, then reads the source's loop under the membership lock
    /// and reconciles under the loop's lock; `add` claims the loop under the membership lock,
    /// then reads the events under the loop's lock. Whichever takes a lock second sees the
    /// other's work, so the registration never keeps the old interest.
    private let requestedEvents: Atomic<UInt8>
    let order: Int
    /// `.fileDescriptor`, or the kind of the source built on this one (`.signal`, `.processExit`),
    /// for loop-health reports.
    let calloutKind: ThreadRunLoop.Callout.Kind
    /// The epoll token of `source1Registrations`.
    private let registrationToken = Source1Token.next()
    private let handler: @Sendable (FileDescriptorSource, Events) -> Void
    let membership = LoopMembership()
    /// What precondition messages call the item: a source that watches for another (a
    /// `ProcessExitSource`'s pidfd) is named after it.
    let itemName: String

    /// Watches `fileDescriptor` for `events`. Sources of one mode ready in the same pass are
    /// handled in readiness order (sources of one descriptor in ascending `order`). Any
    /// thread; no system call until added to a loop.
    public convenience init(fileDescriptor: Int32, events: Events, order: Int = 0,
                            handler: @escaping @Sendable (FileDescriptorSource, Events) -> Void) {
        self.init(fileDescriptor: fileDescriptor, events: events, order: order, itemName: "FileDescriptorSource",
                  calloutKind: .fileDescriptor, handler: handler)
    }

    /// The fd source under another kind of source (`SignalSource`, `ProcessExitSource`): named
    /// `itemName` in precondition messages, its callouts reported as `calloutKind`.
    init(fileDescriptor: Int32, events: Events, order: Int = 0, itemName: String, calloutKind: ThreadRunLoop.Callout.Kind,
         handler: @escaping @Sendable (FileDescriptorSource, Events) -> Void) {
        precondition(fileDescriptor >= 0, "\(itemName) needs an open descriptor (got \(fileDescriptor))")
        precondition(!events.isEmpty, "FileDescriptorSource needs .readable and/or .writable events")
        self.fileDescriptor = fileDescriptor
        requestedEvents = Atomic(events.rawValue)
        self.order = order
        self.itemName = itemName
        self.calloutKind = calloutKind
        self.handler = handler
    }

    /// The readiness the source waits for and reports. Setting it changes what the loop
    /// watches in every mode that holds the source, without removing and re-adding it (the
    /// source keeps its place, and no other source of the mode is disturbed): a connection asks
    /// for `.writable` only while it has output queued, and drops `.readable` while its peer
    /// does not read its replies. A change takes effect at once, even for the pass under way:
    /// a readiness the source no longer asks for is not reported, also when the loop collected
    /// it before the change; a loop asleep in the kernel sees the new interest without being
    /// woken.
    ///
    /// No events pauses the source: the loop stops watching the descriptor for it (errors and
    /// hang-ups included: they are reported once it asks for events again), while the source
    /// stays in its modes, keeps them alive, and resumes where it was when given events again
    /// (`init` still needs some: a new source asks for something).
    ///
    /// Any thread. Reading: one atomic load. Setting: an atomic exchange; when the value
    /// changes on a scheduled source, the loop's lock and, where the union of the events of the
    /// descriptor's sources changed, one epoll_ctl per mode that holds it.
    public var events: Events {
        get { Events(rawValue: requestedEvents.load(ordering: .relaxed)) }
        set {
            let old = requestedEvents.exchange(newValue.rawValue, ordering: .relaxed)
            guard old != newValue.rawValue, let loop = membership.loop else { return }
            loop.fileDescriptorSourceEventsDidChange(self)
        }
    }

    /// Removes the source from its loop; the descriptor stays open (close it afterwards, not
    /// before). Idempotent. Any thread; one epoll_ctl per mode.
    public func invalidate() {
        invalidateMembership()
    }

    /// False once invalidated. Any thread; one atomic load.
    public var isValid: Bool { membership.isValid }

    /// A name for the source's callouts in loop-health reports (`ThreadRunLoop.Callout.label`),
    /// e.g. "client 12". Read only when a callout is reported, so it costs the loop nothing otherwise.
    /// Any thread; a lock.
    public var label: String? {
        get { membership.label }
        set { membership.label = newValue }
    }

    /// The descriptor, its events and whether the source is valid, for logs. Any thread; allocates
    /// the string.
    public var description: String {
        "FileDescriptorSource(fd: \(fileDescriptor), events: \(events.debugSummary), order: \(order), valid: \(isValid))"
    }

    // MARK: - Loop side

    static var itemKind: WritableKeyPath<ItemSet, [FileDescriptorSource]> { \.fileDescriptorSources }
    func attach(to loop: ThreadRunLoop) -> Bool { membership.attach(to: loop, kind: itemName) }
    var sortOrder: Int? { order }
    func registerDescriptors(in modeState: ModeState) { modeState.watch(self) }
    func unregisterDescriptors(from modeState: ModeState) { modeState.unwatch(self) }

    /// The descriptor as a registration of its own, for a source that is not an item but a
    /// port's private watcher, registered in the modes that hold the port (a named port's
    /// listener, handshakes and timer): its descriptor is the port's alone, so it needs none of
    /// the sharing of `watch`.
    var source1Registrations: [Source1Registration] {
        let events = events
        var interest: Epoll.Interest = []
        if events.contains(.readable) { interest.insert(.readable) }
        if events.contains(.writable) { interest.insert(.writable) }
        return [Source1Registration(token: registrationToken, descriptor: FileDescriptor(rawValue: fileDescriptor),
                                    interest: interest, source: .fileDescriptors([self]))]
    }

    /// Calls the handler with the subset of `ready` the source asked for; false if nothing ran.
    func handle(_ ready: Events) -> Bool {
        // The events as of now: a change made earlier in this pass already applies.
        let relevant = ready.intersection(events)
        guard isValid, !relevant.isEmpty else { return false }
        handler(self, relevant)
        return true
    }

}

extension ThreadRunLoop {
    /// `source`, scheduled on this loop, asks for other events: every mode that holds it
    /// reconciles its descriptor's registration. Any thread; the state lock.
    func fileDescriptorSourceEventsDidChange(_ source: FileDescriptorSource) {
        state.withLock { state in
            for modeState in state.modes(holding: source) { modeState.eventsDidChange(of: source) }
        }
    }
}

extension FileDescriptorSource.Events {
    var debugSummary: String {
        [contains(.readable) ? "readable" : nil, contains(.writable) ? "writable" : nil]
            .compactMap { $0 }.joined(separator: "|")
    }
}

import Synchronization
import FoundationEssentials

/// A Source1-like port: senders on any thread queue messages (a msgid plus Data and port
/// components) to it, and the one run loop that receives it delivers them, in order per
/// sender, to its delegate or handler on the loop's thread.
///
/// The queue is bounded by `queueLimit`. `send` never blocks while the queue has room; when it
/// is full the sender sleeps in the kernel until the receiver makes room, the deadline passes
/// (`.timedOut`) or the port is invalidated (`.invalidPort`). The receiving loop learns of the
/// port once per burst (when the queue goes from "drained" to "has messages") through its
/// ready list, which rings the loop only when it is asleep, and drains a bounded batch per
/// pass. With no delegate and no handler, messages stay queued until one is set. A local port
/// holds no descriptor until it gains a send right.
public final class MessagePort: @unchecked Sendable, Hashable, RunLoopItem, CustomStringConvertible {
    /// Receives the port's messages on the receiving loop's thread. Held weakly.
    public protocol Delegate: AnyObject, Sendable {
        /// Called on the receiving loop's thread, once per message, in delivery order
        /// (NSPortDelegate's handlePortMessage:). Return promptly: the loop handles nothing else
        /// meanwhile.
        func handlePortMessage(_ message: MessagePort.Message)
    }

    /// Mutable state, touched only with `lock` held (see `ConditionLock`).
    final class State {
        // Every field is guarded by the port's lock; the runtime exclusivity check would only
        // repeat that.
        @exclusivity(unchecked) var delivering = false
        /// The receiving loop was told the port has messages (`ThreadRunLoop.portBecameReady`)
        /// and has not drained the queue since.
        @exclusivity(unchecked) var loopNotified = false
        /// The loop that receives the port while it is in one of its modes.
        @exclusivity(unchecked) var receivingLoop: ThreadRunLoop?
        @exclusivity(unchecked) var waitingSenders = 0
        @exclusivity(unchecked) var handler: (@Sendable (Message) -> Void)?
        @exclusivity(unchecked) weak var delegate: (any Delegate)?
        /// A handler or delegate was set; a stored flag so `send` need not load the weak delegate.
        /// A delegate that went away is noticed (and this cleared) at delivery.
        @exclusivity(unchecked) var hasReceiver = false
        @exclusivity(unchecked) var invalidationHandler: (@Sendable (MessagePort) -> Void)?
        @exclusivity(unchecked) var statistics = Statistics()
        /// The receive ends of send rights (cross-process senders), created on first use.
        @exclusivity(unchecked) var connections: PortConnections?
        /// The send right this port puts in messages it is a component or reply port of: one
        /// socket end kept here and sent (the kernel duplicates it in flight) every time, so
        /// passing a port costs no socketpair per message.
        @exclusivity(unchecked) var sharedSendRight: SeqPacketSocket?
        @exclusivity(unchecked) var transportErrorHandler: (@Sendable (TransportReport) -> Void)?
        /// `acceptsPortComponents` is false (MessagePort+PortComponents.swift).
        @exclusivity(unchecked) var refusesPortComponents = false
        /// A proxy's eventfd that wakes senders blocked on a full socket when the proxy is
        /// invalidated; made by the first sender that has to wait.
        @exclusivity(unchecked) var invalidationBell: EventFD?
        /// The name this port is published under (MessagePort+Names.swift).
        @exclusivity(unchecked) var publication: NameListener?
        /// Told once when the port is invalidated: requests waiting for it (MessagePort+Request.swift).
        @exclusivity(unchecked) var invalidationWatchers: [UInt64: @Sendable () -> Void] = [:]
        /// The `messages()` sequence that is the receiver, by number; nil when it is not.
        @exclusivity(unchecked) var consumer: UInt64?
        @exclusivity(unchecked) var consumersMade: UInt64 = 0
        /// A `next()` is suspended or about to be: a second one at once is a misuse.
        @exclusivity(unchecked) var consuming = false
        /// The consumer suspended in `next()` until a message arrives (the queue is empty then).
        @exclusivity(unchecked) var waitingConsumer: UnsafeContinuation<Message?, Never>?
        /// Async senders suspended while the queue is full, in arrival order.
        @exclusivity(unchecked) var suspendedSenders: [SuspendedSender] = []
        @exclusivity(unchecked) var sendersSuspended: UInt64 = 0

        /// Whether the loop reads frames from send rights into the queue: a handler, a delegate
        /// or a `messages()` sequence will take them.
        var readsFrames: Bool { hasReceiver || consumer != nil }

        /// The handler, else the delegate (strongly held for the batch being delivered).
        var receiver: Receiver? {
            if let handler { return .handler(handler) }
            return delegate.map(Receiver.delegate)
        }
    }

    enum Receiver {
        case handler(@Sendable (Message) -> Void)
        case delegate(any Delegate)

        func deliver(_ message: Message) {
            switch self {
            case .handler(let handler): handler(message)
            case .delegate(let delegate): delegate.handlePortMessage(message)
            }
        }
    }

    /// The most messages the queue holds before `send` blocks. Any thread; free.
    public let queueLimit: Int
    /// A proxy's send right (one end of a socketpair whose other end another process reads).
    let remote: SeqPacketSocket?
    /// A proxy's way to a port elsewhere when it is not a send right (PortConduit.swift).
    let conduit: (any PortConduit)?
    let token = Source1Token.next()
    let lock = ConditionLock()
    let state = State()
    /// The queued messages; guarded by `lock`. A property of the port itself rather than of
    /// `state`, so that the send and delivery paths reach it without retaining it.
    let queue = RingBuffer<Message>()
    /// The batch being delivered, taken from `queue` under the lock (by exchanging the two
    /// buffers when the whole queue fits the pass's limit, so taking costs nothing per message)
    /// and delivered outside it; touched only by the delivering thread while `state.delivering`
    /// is set.
    let batch = RingBuffer<Message>()
    /// A receiver is set and messages are queued, or frames can be read into a queue with
    /// room: the loop may service the port without asking the kernel.
    let deliverable = Atomic<Bool>(false)
    /// A connection may have frames waiting (reported readable, or parked): set when the loop
    /// sees a connection's readiness, cleared once none is pending. Written only by the loop
    /// thread, which skips reading connections while it is false; read under the lock by
    /// `refreshDeliverableLocked`, so a receiver set later makes the port deliverable.
    let connectionsPending = Atomic<Bool>(false)
    /// The serial of the last item snapshot found to hold this port (`ItemSnapshot.holds`), so
    /// that a mode with many ports finds a ready one without hashing it on every pass. Atomic
    /// only because a loop the port has left may still ask once; serials are never reused, so
    /// another loop's answer is never mistaken for this one's.
    let heldBySnapshot = Atomic<UInt64>(0)
    let membership = LoopMembership()
    /// A proxy's counters, kept outside the lock its sends do not take; nil for a local port.
    let proxyCounters: ProxyCounters?

    /// Creates a port whose queue holds up to `queueLimit` messages. Any thread; a few
    /// allocations and no descriptor (it throws nothing today: the signature leaves room for a
    /// port that needs a kernel resource).
    public init(queueLimit: Int = 1024) throws(PortError) {
        precondition(queueLimit > 0, "MessagePort queueLimit must be at least 1 (got \(queueLimit))")
        self.queueLimit = queueLimit
        remote = nil
        conduit = nil
        proxyCounters = nil
    }

    /// A proxy sending through `socket`.
    convenience init(proxyFor socket: SeqPacketSocket) {
        self.init(proxyFor: socket, conduit: nil)
    }

    /// A proxy sending through `socket` or `conduit`.
    init(proxyFor socket: SeqPacketSocket?, conduit: (any PortConduit)?) {
        queueLimit = 1
        remote = socket
        self.conduit = conduit
        proxyCounters = ProxyCounters()
    }

    deinit {
        remote?.close()
        state.sharedSendRight?.close()
        state.invalidationBell?.close()
        state.connections?.closeAll()
        state.publication?.close()
    }

    // MARK: - Receiving side

    /// The object that receives messages, held weakly; a handler set with `setHandler` takes
    /// precedence. Setting one delivers the messages that waited for it. Any thread; a lock.
    public var delegate: (any Delegate)? {
        get { lock.withLock { state.delegate } }
        set { setReceiver { $0.delegate = newValue } }
    }

    /// Sets (or clears, with nil) a closure that receives messages on the receiving loop's
    /// thread, as an alternative to a delegate. Any thread; a lock.
    public func setHandler(_ handler: (@Sendable (Message) -> Void)?) {
        setReceiver { $0.handler = handler }
    }

    /// Sets a closure called once when the port becomes invalid (the equivalent of a Mach
    /// dead-name notification or NSPortDidBecomeInvalidNotification), with the count of
    /// discarded messages readable from `discardedCount`. It runs on the thread that invalidates
    /// the port, or at once on the calling thread if the port is already invalid. Any thread.
    public func setInvalidationHandler(_ handler: (@Sendable (MessagePort) -> Void)?) {
        let runNow: Bool = lock.withLock {
            guard membership.isValid else { return true }
            state.invalidationHandler = handler
            return false
        }
        if runNow { handler?(self) }
    }

    /// Replaces the receiver: `change` sets a handler, a delegate or (for `messages()`) a new
    /// consumer; a `messages()` sequence that was the receiver finishes. Messages and parked
    /// frames that waited for a receiver make the loop come and deliver or read them.
    func setReceiver(_ change: (State) -> Void) {
        let (loop, finishedConsumer): (ThreadRunLoop?, UnsafeContinuation<Message?, Never>?) = lock.withLock {
            let waiter = state.waitingConsumer
            state.consumer = nil
            state.waitingConsumer = nil
            change(state)
            state.hasReceiver = state.handler != nil || state.delegate != nil
            refreshDeliverableLocked()
            let deliverNow = deliverable.load(ordering: .relaxed)
            if deliverNow { state.loopNotified = true }
            return (deliverNow ? state.receivingLoop : nil, waiter)
        }
        finishedConsumer?.resume(returning: nil)
        loop?.portBecameReady(self)
    }

    /// Recomputes `deliverable` from the state (lock held). A handler or delegate needs the loop
    /// for queued messages and for frames; a `messages()` consumer takes queued messages itself
    /// and needs the loop only to read frames.
    func refreshDeliverableLocked() {
        let framesWaiting = connectionsPending.load(ordering: .relaxed) && queue.count < queueLimit
        let work = state.hasReceiver ? !queue.isEmpty || framesWaiting : state.consumer != nil && framesWaiting
        deliverable.store(membership.isValid && work, ordering: .releasing)
    }

    // MARK: - Sending side

    /// Queues a message; blocks only while the queue is full, until `deadline` (`.timedOut`).
    /// Throws `.invalidPort` if the port is (or becomes, while blocked) invalid. Any thread; a
    /// lock and, once per burst to a sleeping loop, one wake-up (a futex post or an eventfd write).
    /// A message of one Data component allocates nothing of its own; several components are
    /// copied into one array.
    @inlinable
    public func send(msgid: UInt32, components: [Message.Component] = [],
                     from replyPort: MessagePort? = nil,
                     before deadline: ContinuousClock.Instant) throws(PortError) {
        try send(msgid: msgid, payload: Message.Payload(sending: components), from: replyPort, before: deadline)
    }

    /// Queues a message, waiting at most `timeout` while the queue is full. Any thread; costs
    /// as `send(msgid:components:from:before:)`.
    @inlinable
    public func send(msgid: UInt32, components: [Message.Component] = [],
                     from replyPort: MessagePort? = nil,
                     timeout: Duration) throws(PortError) {
        try send(msgid: msgid, payload: Message.Payload(sending: components), from: replyPort, timeout: timeout)
    }

    /// `send(msgid:components:from:before:)` once its components are stored as a message keeps them.
    /// The payload is `consuming` down to the queue: borrowed, it cost a retain and a release of
    /// its Data per message.
    @usableFromInline
    func send(msgid: UInt32, payload: consuming Message.Payload, from replyPort: MessagePort?,
              before deadline: ContinuousClock.Instant) throws(PortError) {
        try send(msgid: msgid, payload: consume payload, from: replyPort, deadline: { deadline })
    }

    /// `send(msgid:components:from:timeout:)` once its components are stored as a message keeps them.
    @usableFromInline
    func send(msgid: UInt32, payload: consuming Message.Payload, from replyPort: MessagePort?,
              timeout: Duration) throws(PortError) {
        // The clock is read only when the send must wait: on the fast path it would cost more
        // than the rest of it.
        try send(msgid: msgid, payload: consume payload, from: replyPort, deadline: { ThreadRunLoop.deadline(after: timeout) })
    }

    @inline(__always)
    private func send(msgid: UInt32, payload: consuming Message.Payload, from replyPort: MessagePort?,
                      deadline: () -> ContinuousClock.Instant?) throws(PortError) {
        if case .components(let components) = payload, !isProxy { try checkAcceptsPortComponents(components) }
        if isProxy {
            try sendRemote(msgid: msgid, payload: payload, replyPort: replyPort, deadline: deadline)
        } else if lockIfRoom() {
            appendLocked(msgid: msgid, payload: consume payload, replyPort: replyPort)
        } else {
            try enqueueWaiting(Message(msgid: msgid, payload: consume payload, replyPort: replyPort), deadline: deadline)
        }
    }

    /// The fast path's test: true, with the lock held, when the port is valid and has room
    /// (the message is then built straight into the queue, with no intermediate copy).
    @inline(__always)
    func lockIfRoom() -> Bool {
        lock.lock()
        guard membership.isValid, queue.count < queueLimit else {
            lock.unlock()
            return false
        }
        return true
    }

    /// The slow path: sleeps until there is room, the deadline passes or the port is invalidated.
    /// The deadline is computed here, so the fast path never touches the clock or its types.
    @inline(never)
    func enqueueWaiting(_ message: consuming Message, deadline: () -> ContinuousClock.Instant?) throws(PortError) {
        let deadline = deadline()
        var waited = false
        lock.lock()
        while true {
            guard membership.isValid else {
                lock.unlock()
                throw .invalidPort
            }
            if queue.count < queueLimit { break }
            if !waited { state.statistics.sendersBlocked &+= 1 }
            waited = true
            state.waitingSenders += 1
            let inTime = lock.wait(until: deadline)
            state.waitingSenders -= 1
            if !inTime && queue.count >= queueLimit && membership.isValid {
                lock.unlock()
                throw .timedOut
            }
        }
        // A sender that waited was woken alone (`give`): it wakes the next while room is left, so
        // every blocked sender gets its turn. One that sees no room now is woken by the next take.
        let passOn = waited && state.waitingSenders > 0 && queue.count + 1 < queueLimit
        appendLocked(consume message)
        if passOn { lock.signal() }
    }

    /// Appends with the lock held, releases it, and tells the receiving loop if this starts a burst.
    /// A `messages()` consumer waiting for a message (the queue is empty then) takes it directly.
    @inline(__always)
    func appendLocked(_ message: consuming Message) {
        if let consumer = state.waitingConsumer {
            handOffLocked(consume message, to: consumer)
            return
        }
        queue.append(consume message)
        didAppendLocked()
    }

    /// `appendLocked(_:)` for the fast path of `send`, which builds the message straight into
    /// its slot. A message is too large to stay in registers: built on the stack first, it was
    /// copied twice on its way to the slot, and read back with wider loads than its fields were
    /// stored with, which stalls the store forwarding (measured: a third of `send`'s time).
    @inline(__always)
    func appendLocked(msgid: UInt32, payload: consuming Message.Payload, replyPort: MessagePort?) {
        if let consumer = state.waitingConsumer {
            handOffLocked(Message(msgid: msgid, payload: consume payload, replyPort: replyPort), to: consumer)
            return
        }
        queue.append(Message(msgid: msgid, payload: consume payload, replyPort: replyPort))
        didAppendLocked()
    }

    /// After a message was queued (lock held): counts it, releases the lock, and tells the
    /// receiving loop if this starts a burst.
    @inline(__always)
    func didAppendLocked() {
        state.statistics.accepted(queued: queue.count)
        var loop: ThreadRunLoop?
        if state.hasReceiver {
            deliverable.store(true, ordering: .releasing)
            if !state.loopNotified {
                state.loopNotified = true
                loop = state.receivingLoop
            }
        }
        lock.unlock()
        loop?.portBecameReady(self)
    }

    // MARK: - State

    /// Removes the port from its loop, fails blocked and future senders with `.invalidPort`,
    /// discards queued messages (counted in `discardedCount`), runs the invalidation handler on
    /// the calling thread, and lets go of the handler and delegate (as CFMessagePortInvalidate
    /// releases its context), so a handler that captures its own port does not keep it alive.
    /// Idempotent. Any thread.
    public func invalidate() {
        let (wasValid, loop) = membership.invalidate()
        guard wasValid else { return }
        // The receiver is released after the lock: its captures' deinits may call into the port.
        var receiver: Receiver?
        let (handler, consumer, senders) = lock.withLock {
            () -> ((@Sendable (MessagePort) -> Void)?, UnsafeContinuation<Message?, Never>?, [SuspendedSender]) in
            receiver = state.receiver
            state.handler = nil
            state.delegate = nil
            state.hasReceiver = false
            state.statistics.discarded &+= UInt64(queue.count)
            queue.removeAll()
            // The owner's receive ends are shut down rather than closed (another thread may
            // still use the descriptors, closed in deinit): every sender sees EPIPE at once.
            // A proxy's socket is NOT shut down: every holder of the send right, in any process,
            // shares it, and letting go of one right must not cut off the others. Its blocked
            // senders are woken through the invalidation bell instead.
            state.connections?.shutdownAll()
            state.invalidationBell?.ring()
            deliverable.store(false, ordering: .releasing)
            lock.broadcast()
            defer {
                state.invalidationHandler = nil
                state.waitingConsumer = nil
                state.suspendedSenders = []
            }
            return (state.invalidationHandler, state.waitingConsumer, state.suspendedSenders)
        }
        // Continuations resume outside the lock: resuming may enqueue a job on a loop, whose
        // lock is taken before a port's, never after.
        consumer?.resume(returning: nil)
        for sender in senders { sender.continuation.resume(returning: .invalidated) }
        loop?.removeEverywhere(self)
        conduit?.proxyInvalidated()
        didInvalidate()
        handler?(self)
        withExtendedLifetime(receiver) {}
    }

    /// False once invalidated. Any thread; one atomic load.
    public var isValid: Bool { membership.isValid }

    /// Messages queued and not yet taken for delivery. Any thread; a lock.
    public var queuedCount: Int { lock.withLock { queue.count } }

    /// Messages discarded because the port was invalidated while they were queued (or while a
    /// batch taken for delivery was still being delivered). Any thread; a lock.
    public var discardedCount: Int { lock.withLock { Int(state.statistics.discarded) } }

    /// Identity: two values are equal when they are the same port. Any thread; free.
    public static func == (lhs: MessagePort, rhs: MessagePort) -> Bool { lhs === rhs }
    /// Hashes the identity. Any thread; free.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The port's kind, state and queue, for logs. Any thread; a lock and the string.
    public var description: String {
        let (queued, receiving) = lock.withLock { (queue.count, state.hasReceiver) }
        if let remote {
            return "MessagePort(#\(token), proxy via \(remote.descriptor), \(isValid ? "valid" : "invalid"))"
        }
        if conduit != nil {
            return "MessagePort(#\(token), remote proxy, \(isValid ? "valid" : "invalid"))"
        }
        return "MessagePort(#\(token), queued: \(queued)/\(queueLimit), receiver: \(receiving ? "set" : "none"), \(isValid ? "valid" : "invalid"))"
    }

    // MARK: - Loop side

    static var itemKind: WritableKeyPath<ItemSet, [MessagePort]> { \.ports }

    var source1Registrations: [Source1Registration] {
        if let remote {
            return [Source1Registration(token: token, descriptor: remote.descriptor,
                                        interest: [.peerHangUp, .edgeTriggered], source: .proxy(self))]
        }
        var registrations: [Source1Registration] = []
        lock.withLock {
            registrations += state.publication?.registrations ?? []
            guard let connections = state.connections else { return }
            for connection in connections.registered {
                registrations.append(registration(of: connection, in: connections))
            }
        }
        return registrations
    }

    func registration(of connection: PortConnection, in connections: PortConnections) -> Source1Registration {
        Source1Registration(token: connection.token, descriptor: connection.socket.descriptor,
                            interest: [.readable], source: .portConnection(self, connections, connection))
    }
    func attach(to loop: ThreadRunLoop) -> Bool {
        guard membership.attach(to: loop, kind: "MessagePort") else { return false }
        lock.withLock { state.receivingLoop = loop }
        return true
    }

    func detach(from loop: ThreadRunLoop) {
        membership.detach(from: loop)
        lock.withLock { if state.receivingLoop === loop { state.receivingLoop = nil } }
    }

    /// Messages that arrived before the port entered this mode are delivered in it.
    func didSchedule(in loop: ThreadRunLoop, mode: ThreadRunLoop.Mode) {
        if hasDeliverableMessages { loop.portBecameReady(self) }
    }

    /// Whether `loop` receives the port (it is in one of the loop's modes). Any thread; a lock.
    func isReceived(by loop: ThreadRunLoop) -> Bool {
        lock.withLock { state.receivingLoop === loop }
    }

    /// Whether a receiver is set and messages are queued. Lock-free: the loop checks it every pass.
    var hasDeliverableMessages: Bool { deliverable.load(ordering: .acquiring) }

    /// Delivers up to `limit` messages, in order, on the calling (receiving loop's) thread: one
    /// callout of `loop` each. Returns how many were delivered.
    func deliver(upTo limit: Int, on loop: ThreadRunLoop) -> Int {
        lock.lock()
        guard membership.isValid, !queue.isEmpty, let receiver = state.receiver else {
            // Nothing queued, or no receiver (a delegate may have gone away, or a `messages()`
            // consumer takes them itself): park until a message or a receiver arrives.
            state.hasReceiver = state.receiver != nil
            if queue.isEmpty || state.consumer != nil { state.loopNotified = false }
            refreshDeliverableLocked()
            lock.unlock()
            return 0
        }
        // One message at a time when only one is wanted or waiting (no batch bookkeeping, one
        // lock round), and in a delivery nested in a handler's own nested run, since the outer
        // delivery still owns the batch buffer. Messages left in that batch were taken before
        // anything queued now, so they go first: each sender's order holds in nested runs too.
        if state.delivering || limit == 1 || queue.count == 1 {
            let message = (state.delivering ? batch.popFirst() : nil) ?? queue.popFirst()!
            state.statistics.delivered &+= 1
            let room = didTakeLocked()
            lock.unlock()
            give(room)
            loop.callout(.port, self, msgid: message.msgid) { receiver.deliver(message) }
            return 1
        }
        state.delivering = true
        if queue.count <= limit {
            queue.swapContents(with: batch)
        } else {
            for _ in 0..<limit { batch.append(queue.popFirst()!) }
        }
        let room = didTakeLocked()
        lock.unlock()
        give(room)

        var delivered = 0
        // Validity is checked before a message is taken: one taken and then dropped for an
        // invalidation would be neither delivered nor counted as discarded.
        while membership.isValid, let message = batch.popFirst() {
            loop.callout(.port, self, msgid: message.msgid) { receiver.deliver(message) }
            delivered += 1
        }
        lock.withLock {
            state.statistics.delivered &+= UInt64(delivered)
            state.statistics.discarded &+= UInt64(batch.count)
            batch.removeAll()
            state.delivering = false
        }
        return delivered
    }

    /// Gives `message` to the `messages()` consumer waiting on the empty queue (lock held;
    /// released here). The message takes no slot, so senders waiting for one are woken as if it
    /// had been taken.
    @inline(never)
    func handOffLocked(_ message: consuming Message, to consumer: UnsafeContinuation<Message?, Never>) {
        state.waitingConsumer = nil
        state.statistics.accepted(queued: 0)
        state.statistics.delivered &+= 1
        let room = didTakeLocked()
        lock.unlock()
        consumer.resume(returning: message)
        give(room)
    }

    /// After messages were taken from the queue (lock held): re-arms the loop notice once the
    /// queue is drained, and says who the room goes to, for `give(_:)` once the lock is released:
    /// one sender blocked in `send` and, once the queue is down to half its limit, one suspended
    /// async sender per free slot (so a full queue wakes its async senders in batches rather
    /// than one task per message taken).
    func didTakeLocked() -> Room {
        if queue.isEmpty {
            state.loopNotified = false
            refreshDeliverableLocked()
        }
        let wakeBlocked = state.waitingSenders > 0
        guard !state.suspendedSenders.isEmpty, queue.count <= queueLimit / 2 else {
            return Room(wakeBlocked: wakeBlocked, suspended: [])
        }
        let woken = min(queueLimit - queue.count, state.suspendedSenders.count)
        defer { state.suspendedSenders.removeFirst(woken) }
        return Room(wakeBlocked: wakeBlocked, suspended: Array(state.suspendedSenders.prefix(woken)))
    }

    /// Wakes the senders `room` names, with the port's lock released: a blocked sender woken
    /// while the receiver still held the lock would only sleep again on the mutex (on one CPU, two
    /// context switches per batch taken for nothing), and resuming a task may enqueue a job on a
    /// loop, whose lock is taken before a port's, never after. A sender that starts waiting
    /// after the lock was released saw the room itself.
    ///
    /// Blocked senders are woken one at a time, and each passes the wake-up on while room is left
    /// (`enqueueWaiting`). Woken all at once, every sender but the first found the queue full
    /// again once the first had filled it, and slept again: with four senders, 2.5 times the
    /// context switches of one for the same stream.
    @inline(__always)
    func give(_ room: Room) {
        if room.wakeBlocked { lock.signal() }
        for sender in room.suspended { sender.continuation.resume(returning: .room) }
    }
}

/// Who the room made by taking messages goes to (`MessagePort.didTakeLocked()`).
struct Room {
    /// Senders are blocked in the synchronous `send`: one is woken.
    let wakeBlocked: Bool
    /// The suspended async senders given a slot each.
    let suspended: [SuspendedSender]
}

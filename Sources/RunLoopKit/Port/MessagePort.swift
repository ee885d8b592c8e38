#if canImport(Glibc)
import Glibc
#endif
import Synchronization
import FoundationEssentials

/// A Source1-like port: senders on any thread queue messages (a msgid plus Data and port
/// components) to it, and the one run loop that receives it delivers them, in order per
/// sender, to its delegate or handler on the loop's thread.
///
/// The queue is bounded by `queueLimit`. `send` takes no lock while the queue has room (see
/// `MessageInbox`); when it is full the sender sleeps in the kernel until the receiver makes
/// room, the deadline passes (`.timedOut`) or the port is invalidated (`.invalidPort`). The
/// receiving loop learns of the port once per burst (when the queue goes from "drained" to "has
/// messages") through its ready list, which rings the loop only when it is asleep, and takes
/// everything queued (up to a batch) per pass. With no receiver, messages stay queued until one
/// is set. A local port holds no descriptor until it gains a send right.
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
        /// The receiving loop is delivering a batch straight from the inbox, without the lock: the
        /// receiver's side of the inbox is its own until it clears this (`deliver(upTo:)`).
        @exclusivity(unchecked) var delivering = false
        /// The receiving loop was told the port has messages (`ThreadRunLoop.portBecameReady`)
        /// and has not drained the queue since.
        @exclusivity(unchecked) var loopNotified = false
        /// The loop that receives the port while it is in one of its modes.
        @exclusivity(unchecked) var receivingLoop: ThreadRunLoop?
        /// Senders blocked in `send` (waiting on the lock's condition).
        @exclusivity(unchecked) var waitingSenders = 0
        @exclusivity(unchecked) var handler: (@Sendable (Message) -> Void)?
        @exclusivity(unchecked) var batchHandler: (@Sendable (inout Batch) -> Void)?
        @exclusivity(unchecked) weak var delegate: (any Delegate)?
        /// A handler, batch handler or delegate was set; a stored flag so that the port's bookkeeping
        /// need not load the weak delegate. A delegate that went away is noticed (and this cleared) at
        /// delivery.
        @exclusivity(unchecked) var hasReceiver = false
        @exclusivity(unchecked) var invalidationHandler: (@Sendable (MessagePort) -> Void)?
        /// Delivered, discarded and blocked senders; `sent` counts only frames handed straight to
        /// the receiver, the inbox counts the rest (`statistics`).
        @exclusivity(unchecked) var statistics = Statistics()
        /// The receive ends of send rights (cross-process senders), created on first use.
        @exclusivity(unchecked) var connections: PortConnections?
        /// The send right this port puts in messages it is a component or reply port of: one
        /// socket end kept here and sent (the kernel duplicates it in flight) every time, so
        /// passing a port costs no socketpair per message.
        @exclusivity(unchecked) var sharedSendRight: SeqPacketSocket?
        @exclusivity(unchecked) var transportErrorHandler: (@Sendable (TransportReport) -> Void)?
        /// `maximumIncomingDataSize` (Transport/MessagePort+SealedMemory.swift), read without the lock.
        let incomingData = IncomingDataLimit()
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
        /// The consumer suspended in `next()` until a message arrives (the inbox is armed then):
        /// resumed to look again.
        @exclusivity(unchecked) var waitingConsumer: UnsafeContinuation<Void, Never>?
        /// Async senders suspended while the queue is full, in arrival order.
        @exclusivity(unchecked) var suspendedSenders: [SuspendedSender] = []
        @exclusivity(unchecked) var sendersSuspended: UInt64 = 0

        /// Whether the loop reads frames from send rights into the queue: a handler, a delegate
        /// or a `messages()` sequence will take them.
        var readsFrames: Bool { hasReceiver || consumer != nil }

        /// The batch handler, else the handler, else the delegate (strongly held for the batch being
        /// delivered).
        var receiver: Receiver? {
            if let batchHandler { return .batch(batchHandler) }
            if let handler { return .handler(handler) }
            return delegate.map(Receiver.delegate)
        }
    }

    /// Whoever the port calls out to. Its two `deliver` methods are the only places a port calls a
    /// handler, a batch handler or a delegate.
    enum Receiver {
        case handler(@Sendable (Message) -> Void)
        case delegate(any Delegate)
        case batch(@Sendable (inout Batch) -> Void)

        /// Whether it takes messages one call each (a handler or a delegate).
        var takesOneAtATime: Bool {
            if case .batch = self { false } else { true }
        }

        /// One message to a handler or delegate (`takesOneAtATime`), as a callout of `loop`.
        func deliver(_ message: borrowing Message, from port: MessagePort, on loop: ThreadRunLoop) {
            switch self {
            case .handler(let handler):
                loop.callout(.port, port, msgid: message.msgid, with: message) { message in
                    MessageContext.withContext(of: message.metadata) { handler(message) }
                }
            case .delegate(let delegate):
                loop.callout(.port, port, msgid: message.msgid, with: message) { message in
                    MessageContext.withContext(of: message.metadata) { delegate.handlePortMessage(message) }
                }
            case .batch: preconditionFailure("RunLoopKit: a single message was handed to a batch handler")
            }
        }

        /// A pass's messages: to a batch handler in one call (one callout, without a msgid), to a
        /// handler or delegate one call (and callout) each, until the pass must yield (a stop, or
        /// its fairness slice is over): the messages left stay first in the queue, for a later
        /// pass (§3.52, §3.55). The receiver is looked at once per
        /// batch, and each message is handed over borrowed: captured by the callout's closure, it
        /// was copied (a retain and a release of each of its references per message).
        func deliver(_ batch: inout Batch, from port: MessagePort, on loop: ThreadRunLoop) {
            switch self {
            case .batch(let handler):
                loop.callout(.port, port) {
                    MessageContext.withContext(of: batch.firstMetadata()) { handler(&batch) }
                }
            case .handler(let handler):
                while let message = batch.next() {
                    loop.callout(.port, port, msgid: message.msgid, with: message) { message in
                        MessageContext.withContext(of: message.metadata) { handler(message) }
                    }
                    if loop.passShouldYield { break }
                }
            case .delegate(let delegate):
                while let message = batch.next() {
                    loop.callout(.port, port, msgid: message.msgid, with: message) { message in
                        MessageContext.withContext(of: message.metadata) { delegate.handlePortMessage(message) }
                    }
                    if loop.passShouldYield { break }
                }
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
    /// The queued messages (see `MessageInbox` for who may touch what). A property of the port
    /// itself rather than of `state`, so that the send and delivery paths reach it without
    /// retaining it.
    let inbox: MessageInbox
    /// A receiver is set and messages are queued, or frames can be read into a queue with
    /// room: the loop may service the port without asking the kernel. Written with the lock held;
    /// while it is false and a receiver is set, the inbox is armed, so the next message tells the
    /// loop.
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
    /// Whether the port is a send-once right, and whether it was used (`SendOnce`, §3.50).
    let sendOnceState = Atomic<UInt8>(SendOnce.unlimited)
    /// The inbox of every proxy: a proxy queues nothing (its messages go to a socket or a
    /// conduit), so it never claims a slot and the ring is never made.
    private static let proxyInbox = MessageInbox(limit: 1, batchLimit: 1)

    /// Creates a port whose queue holds up to `queueLimit` messages. Any thread; a few
    /// allocations and no descriptor (it throws nothing today: the signature leaves room for a
    /// port that needs a kernel resource).
    public init(queueLimit: Int = 1024) throws(PortError) {
        precondition(queueLimit > 0, "MessagePort queueLimit must be at least 1 (got \(queueLimit))")
        self.queueLimit = queueLimit
        inbox = MessageInbox(limit: queueLimit, batchLimit: ThreadRunLoop.source1BatchLimit)
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
        inbox = Self.proxyInbox
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

    /// The object that receives messages, held weakly; a handler set with `setHandler` (or a
    /// batch handler, `setBatchHandler`) takes precedence. Setting one delivers the messages that
    /// waited for it. Any thread; a lock.
    public var delegate: (any Delegate)? {
        get { lock.withLock { state.delegate } }
        set { setReceiver { $0.delegate = newValue } }
    }

    /// Sets (or clears, with nil) a closure that receives messages on the receiving loop's
    /// thread, one call per message, as an alternative to a delegate; a batch handler
    /// (`setBatchHandler`) takes precedence. Any thread; a lock.
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

    /// Replaces the receiver: `change` sets a handler, a batch handler, a delegate or (for
    /// `messages()`) a new consumer; a `messages()` sequence that was the receiver finishes.
    /// Messages and parked frames that waited for a receiver make the loop come and deliver or
    /// read them.
    func setReceiver(_ change: (State) -> Void) {
        let (settled, finishedConsumer): (Settled, UnsafeContinuation<Void, Never>?) = lock.withLock {
            let waiter = state.waitingConsumer
            state.consumer = nil
            state.waitingConsumer = nil
            change(state)
            state.hasReceiver = state.handler != nil || state.batchHandler != nil || state.delegate != nil
            return (settleLocked(), waiter)
        }
        finishedConsumer?.resume()
        finish(settled)
    }

    /// Decides, with the lock held, whether the loop must come for the port, and sets
    /// `deliverable`: a handler or delegate needs the loop for queued messages and for frames; a
    /// `messages()` consumer takes queued messages itself and needs the loop only to read frames.
    /// With nothing to deliver, the inbox is armed, so that the next message tells the loop (or
    /// resumes the waiting consumer). While a batch is being delivered nothing is decided: the
    /// batch's end settles the port.
    func settleLocked() -> Settled {
        var settled = Settled()
        guard !state.delivering else { return settled }
        guard membership.isValid else {
            deliverable.store(false, ordering: .releasing)
            state.loopNotified = false
            return settled
        }
        let framesWaiting = connectionsPending.load(ordering: .relaxed) && inbox.count < queueLimit
        let work: Bool
        if state.hasReceiver {
            work = !inbox.arm() || framesWaiting
        } else {
            if let waiter = state.waitingConsumer, !inbox.arm() {
                state.waitingConsumer = nil
                settled.consumer = waiter
            }
            work = state.consumer != nil && framesWaiting
        }
        deliverable.store(work, ordering: .releasing)
        if !work {
            state.loopNotified = false
        } else if !state.loopNotified, let loop = state.receivingLoop {
            state.loopNotified = true
            settled.loop = loop
        }
        return settled
    }

    /// Acts, with the lock released, on what `settleLocked()` decided: resuming a task may
    /// enqueue a job on a loop, and a loop's lock is taken before a port's, never after.
    @inline(__always)
    func finish(_ settled: Settled) {
        settled.consumer?.resume()
        settled.loop?.portBecameReady(self)
    }

    // MARK: - Sending side

    /// Queues a message; blocks only while the queue is full, until `deadline` (`.timedOut`).
    /// Throws `.invalidPort` if the port is (or becomes, while blocked) invalid. Any thread; while
    /// the queue has room no lock, two atomic read-modify-writes (one claims a slot, one publishes
    /// the message built in it) and, once per burst to a sleeping loop, a lock and one wake-up (a
    /// futex post or an eventfd write). A message of one Data component allocates nothing of its
    /// own; several components are copied into one array.
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
        let sendOnce = _slowPath(sendOnceState.load(ordering: .relaxed) != SendOnce.unlimited)
        if sendOnce { try consumeSendOnce() }
        if _slowPath(MessageMonitors.active.load(ordering: .relaxed)) { MessageMonitors.sent(self, msgid: msgid, payload: payload, hasReply: replyPort != nil) }
        if case .components(let components) = payload, !isProxy { try checkAcceptsPortComponents(components) }
        // The sender's trace context, when an instrument is installed (one atomic load otherwise).
        let metadata = MessageContext.metadataForSend()
        if isProxy {
            do {
                try sendRemote(msgid: msgid, payload: payload, replyPort: replyPort, metadata: metadata, deadline: deadline)
            } catch {
                if sendOnce { sendOnceNotSent() }
                throw error
            }
            if sendOnce { sentThroughSendOnceProxy() }
        } else if membership.isValid, case .success(let position) = inbox.claim() {
            // Built straight in its slot: a message is too large to stay in registers, and one built
            // on the stack first was copied twice on its way and read back with wider loads than
            // its fields were stored with, which stalls the store forwarding.
            inbox.slot(at: position).initialize(
                to: Message(msgid: msgid, payload: consume payload, replyPort: replyPort, metadata: metadata))
            publish(position)
        } else {
            do {
                try enqueueWaiting(Message(msgid: msgid, payload: consume payload, replyPort: replyPort, metadata: metadata),
                                   deadline: deadline)
            } catch {
                if sendOnce { sendOnceNotSent() }
                throw error
            }
        }
    }

    /// Publishes the message built at `position`. The receiver may have asked to be told (it
    /// found the queue drained), and the port may have been invalidated since the sender looked
    /// (the message must then be discarded and counted, not left behind): both are rare, and
    /// taken care of with the lock.
    @inline(__always)
    func publish(_ position: UInt64) {
        if inbox.publish(position) || !membership.isValid { didPublish() }
    }

    /// The rare end of a send: tells the receiver, or discards what an invalidation left (a
    /// sender that looked at validity before `invalidate()` and published after it; the publication
    /// is sequentially consistent, so either this sender sees the port invalid or the invalidation
    /// sees the message published).
    @inline(never)
    func didPublish() {
        lock.lock()
        guard membership.isValid else {
            if !state.delivering { state.statistics.discarded &+= UInt64(inbox.discardPublished()) }
            lock.unlock()
            return
        }
        let settled = settleLocked()
        lock.unlock()
        finish(settled)
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
            switch inbox.claim() {
            case .success(let position):
                // A sender that waited was woken alone (`give`): it wakes the next while room is left,
                // so every blocked sender gets its turn. One that sees no room now is woken by the next take.
                let passOn = waited && state.waitingSenders > 0 && inbox.count < queueLimit
                inbox.slot(at: position).initialize(to: consume message)
                if passOn { lock.signal() }
                lock.unlock()
                publish(position)
                return
            case .failure(.unallocated):
                guard inbox.allocate() else {
                    lock.unlock()
                    throw .resourceExhausted(errno: ENOMEM)
                }
                continue
            case .failure(.full):
                break
            }
            if !waited { state.statistics.sendersBlocked &+= 1 }
            waited = true
            state.waitingSenders += 1
            let inTime = lock.wait(until: deadline)
            state.waitingSenders -= 1
            if !inTime {
                // One last look: room made as the deadline passed still counts.
                guard membership.isValid, case .success(let position) = inbox.claim() else {
                    let valid = membership.isValid
                    lock.unlock()
                    throw valid ? .timedOut : .invalidPort
                }
                inbox.slot(at: position).initialize(to: consume message)
                lock.unlock()
                publish(position)
                return
            }
        }
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
            () -> ((@Sendable (MessagePort) -> Void)?, UnsafeContinuation<Void, Never>?, [SuspendedSender]) in
            receiver = state.receiver
            state.handler = nil
            state.batchHandler = nil
            state.delegate = nil
            state.hasReceiver = false
            // A batch being delivered discards the rest itself when it ends.
            if !state.delivering { state.statistics.discarded &+= UInt64(inbox.discardPublished()) }
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
        consumer?.resume()
        for sender in senders { sender.continuation.resume(returning: .invalidated) }
        loop?.removeEverywhere(self)
        conduit?.proxyInvalidated()
        didInvalidate()
        handler?(self)
        withExtendedLifetime(receiver) {}
    }

    /// False once invalidated. Any thread; one atomic load.
    public var isValid: Bool { membership.isValid }

    /// Messages queued and not yet taken for delivery. Any thread; two atomic loads.
    public var queuedCount: Int { inbox.count }

    /// Messages discarded because the port was invalidated while they were queued (or while a
    /// batch taken for delivery was still being delivered). Any thread; a lock.
    public var discardedCount: Int { lock.withLock { Int(state.statistics.discarded) } }

    /// Identity: two values are equal when they are the same port. Any thread; free.
    public static func == (lhs: MessagePort, rhs: MessagePort) -> Bool { lhs === rhs }
    /// Hashes the identity. Any thread; free.
    public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }

    /// The port's kind, state and queue, for logs. Any thread; a lock and the string.
    public var description: String {
        let (queued, receiving) = lock.withLock { (inbox.count, state.hasReceiver) }
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
        guard membership.isValid, let receiver = state.receiver else {
            // No receiver (a delegate may have gone away, or a `messages()` consumer takes them
            // itself): park until a message or a receiver arrives.
            state.hasReceiver = false
            let settled = settleLocked()
            lock.unlock()
            finish(settled)
            return 0
        }
        guard inbox.headIsPublished else {
            // Nothing to deliver yet (the message at the head is still being built, or was taken
            // by a pass nested in a handler): a batch handler is not called with an empty batch.
            let settled = settleLocked()
            lock.unlock()
            finish(settled)
            return 0
        }
        // One message at a time when only one is wanted or queued (no batch bookkeeping, one lock
        // round), and in a delivery nested in a handler's own nested run: it continues the outer
        // batch, whose messages were queued before anything queued now, so each sender's order
        // holds in nested runs too.
        if receiver.takesOneAtATime && (state.delivering || limit == 1 || !inbox.hasMoreThanHead) {
            let message = inbox.takeOne()!
            state.statistics.delivered &+= 1
            let room = didTakeLocked()
            let settled = settleLocked()
            lock.unlock()
            give(room)
            finish(settled)
            receiver.deliver(message, from: self, on: loop)
            return 1
        }
        // The batch: everything queued up to `limit`, taken by moving one position, and delivered
        // from the inbox with the lock released.
        let nested = state.delivering
        state.delivering = true
        var batch = Batch(of: self, end: inbox.take(upTo: limit))
        let room = didTakeLocked()
        lock.unlock()
        give(room)

        receiver.deliver(&batch, from: self, on: loop)

        lock.lock()
        state.statistics.delivered &+= UInt64(batch.taken)
        state.delivering = nested
        if !nested {
            if !membership.isValid {
                state.statistics.discarded &+= UInt64(inbox.discardPublished())
            } else {
                // A batch that ended early (a stop, the pass's fairness slice) leaves the rest
                // queued again, first in line (§3.55).
                inbox.requeueUndelivered()
            }
        }
        let settled = settleLocked()
        lock.unlock()
        finish(settled)
        return batch.taken
    }

    /// After messages were taken from the queue (lock held): says who the room goes to, for
    /// `give(_:)` once the lock is released: one sender blocked in `send` and, once the queue is
    /// down to half its limit, one suspended async sender per free slot (so a full queue wakes its
    /// async senders in batches rather than one task per message taken).
    func didTakeLocked() -> Room {
        let wakeBlocked = state.waitingSenders > 0
        let queued = inbox.count
        guard !state.suspendedSenders.isEmpty, queued <= queueLimit / 2 else {
            return Room(wakeBlocked: wakeBlocked, suspended: [])
        }
        let woken = min(queueLimit - queued, state.suspendedSenders.count)
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

/// What a port's bookkeeping decided to do once its lock is released (`MessagePort.settleLocked()`).
struct Settled {
    /// The `messages()` consumer to resume: a message is there for it.
    var consumer: UnsafeContinuation<Void, Never>?
    /// The loop to tell that the port has messages for it.
    var loop: ThreadRunLoop?
}

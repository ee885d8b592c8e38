#if canImport(Glibc)
import Glibc
#endif

/// Ports from async code (§3.22–23): a port's messages as an `AsyncSequence`, and a
/// `send` that suspends the calling task, instead of blocking its thread, while the queue is full.
extension MessagePort {
    /// The port's messages, for one consumer (`for await message in port.messages()`). It needs
    /// no run loop for senders in this process; a port with send rights in other processes must
    /// also be on a loop, whose passes read their frames into the queue.
    public struct Messages: AsyncSequence, Sendable {
/// Each element is one message, in delivery order.
        public typealias Element = MessagePort.Message
/// The sequence never throws: it ends (nil) on invalidation or cancellation.
        public typealias Failure = Never

        let port: MessagePort
        let consumer: UInt64

        /// Takes the port's messages in order, one `next()` at a time.
        public struct AsyncIterator: AsyncIteratorProtocol {
/// Each element is one message, in delivery order.
            public typealias Element = MessagePort.Message
/// The iterator never throws: it returns nil on invalidation or cancellation.
            public typealias Failure = Never

            let port: MessagePort
            let consumer: UInt64
            var finished = false

            /// The next message: taken from the queue, or awaited until one is sent. Nil once the
            /// port is invalidated, another receiver is set, or the calling task is cancelled (the
            /// port stays valid then, and its queued messages wait for the next consumer).
            /// Any task; a lock, and a suspension when the queue is empty.
            public mutating func next() async -> MessagePort.Message? {
                guard !finished else { return nil }
                let message = await port.nextMessage(for: consumer)
                if message == nil { finished = true }
                return message
            }
        }

        /// The iterator; make one and consume from one task at a time. Any thread; free.
        public func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(port: port, consumer: consumer)
        }
    }

    /// Makes the returned sequence the port's receiver, in place of a handler, a delegate or an
    /// earlier sequence (which finishes). Setting a handler or delegate later finishes this one.
    /// Messages stay queued, bounded by `queueLimit`, until `next()` takes them: a consumer that
    /// pauses makes senders block (or suspend) at the limit. Only for a local port: a proxy's
    /// messages are received in the process that owns the port. Any thread; a lock.
    public func messages() -> Messages {
        precondition(!isProxy, """
            MessagePort.messages() called on a proxy (\(self)): a proxy only sends; its messages \
            are received by the process that owns the port
            """)
        var consumer: UInt64 = 0
        setReceiver { state in
            state.handler = nil
            state.batchHandler = nil
            state.delegate = nil
            state.consumersMade += 1
            state.consumer = state.consumersMade
            consumer = state.consumersMade
        }
        return Messages(port: self, consumer: consumer)
    }

    /// Queues a message from async code: never blocks a thread. While the queue is full the task
    /// suspends until there is room; throws `.invalidPort` if the port is (or becomes, while it
    /// waits) invalid, and `.cancelled` if the task is cancelled while it would wait — nothing is
    /// queued then. Messages from one task arrive in the order sent. No deadline: race it with
    /// your own timeout. Any task; while the queue has room, costs what the blocking `send` does
    /// (no lock). A message of one Data component allocates nothing of its own; several
    /// components are copied into one array.
    @inlinable
    public func send(msgid: UInt32, components: [Message.Component] = [],
                     from replyPort: MessagePort? = nil) async throws(PortError) {
        try await send(msgid: msgid, payload: Message.Payload(sending: components), from: replyPort)
    }

    /// The async `send` once its components are stored as a message keeps them; the payload is
    /// `consuming` down to the queue, as in the blocking `send`.
    @usableFromInline
    func send(msgid: UInt32, payload: consuming Message.Payload, from replyPort: MessagePort?) async throws(PortError) {
        let sendOnce = _slowPath(sendOnceState.load(ordering: .relaxed) != SendOnce.unlimited)
        if sendOnce { try consumeSendOnce() }
        if case .components(let components) = payload, !isProxy { try checkAcceptsPortComponents(components) }
        let metadata = MessageContext.metadataForSend()
        if isProxy {
            do {
                try await sendRemoteSuspending(msgid: msgid, payload: payload, replyPort: replyPort, metadata: metadata)
            } catch {
                if sendOnce { sendOnceNotSent() }
                throw error
            }
            if sendOnce { sentThroughSendOnceProxy() }
        } else if membership.isValid, case .success(let position) = inbox.claim() {
            inbox.slot(at: position).initialize(
                to: Message(msgid: msgid, payload: consume payload, replyPort: replyPort, metadata: metadata))
            publish(position)
        } else {
            do {
                try await enqueueSuspending(Message(msgid: msgid, payload: consume payload, replyPort: replyPort,
                                                    metadata: metadata))
            } catch {
                if sendOnce { sendOnceNotSent() }
                throw error
            }
        }
    }

    // MARK: - Consumer side

    /// `next()` for the sequence numbered `consumer`.
    func nextMessage(for consumer: UInt64) async -> Message? {
        lock.lock()
        precondition(!state.consuming, """
            MessagePort.messages(): next() called while another next() on port #\(token) is in progress; \
            a port's messages have one consumer at a time
            """)
        while true {
            switch pollLocked(for: consumer) {
            case .message(let message):
                state.consuming = false
                tookForConsumerLocked()
                return message
            case .finished:
                state.consuming = false
                lock.unlock()
                return nil
            case .empty:
                state.consuming = true
                lock.unlock()
            }
            await withTaskCancellationHandler {
                await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                    lock.lock()
                    // Suspends only while nothing changed since the look above; otherwise looks again.
                    guard state.consumer == consumer, membership.isValid, !Task.isCancelled,
                          state.delivering || inbox.arm() else {
                        lock.unlock()
                        continuation.resume()
                        return
                    }
                    state.waitingConsumer = continuation
                    lock.unlock()
                }
            } onCancel: {
                let waiter: UnsafeContinuation<Void, Never>? = lock.withLock {
                    defer { state.waitingConsumer = nil }
                    return state.waitingConsumer
                }
                waiter?.resume()
            }
            lock.lock()
        }
    }

    /// What `next()` finds (lock held).
    private enum Poll {
        case message(Message)
        /// The sequence is over: invalidated, replaced, or its task cancelled.
        case finished
        /// Nothing queued: the inbox is armed, so the next message resumes the consumer. (Or the
        /// loop is finishing a batch for the receiver before this one; the batch's end resumes it.)
        case empty
    }

    private func pollLocked(for consumer: UInt64) -> Poll {
        guard state.consumer == consumer, membership.isValid, !Task.isCancelled else { return .finished }
        guard !state.delivering else { return .empty }
        repeat {
            if let message = inbox.takeOne() { return .message(message) }
        } while !inbox.arm()
        return .empty
    }

    /// After the consumer took a message from the queue (lock held; released here): wakes
    /// senders waiting for room, and the loop if frames wait to be read into that room.
    private func tookForConsumerLocked() {
        state.statistics.delivered &+= 1
        let room = didTakeLocked()
        let settled = settleLocked()
        lock.unlock()
        give(room)
        finish(settled)
    }

    // MARK: - Suspending senders

    /// The slow path of the async `send`: suspends until there is room, the port is invalidated
    /// or the task is cancelled.
    @inline(never)
    func enqueueSuspending(_ message: Message) async throws(PortError) {
        var suspended = false
        while true {
            lock.lock()
            guard membership.isValid else {
                lock.unlock()
                throw .invalidPort
            }
            switch inbox.claim() {
            case .success(let position):
                inbox.slot(at: position).initialize(to: message)
                lock.unlock()
                publish(position)
                return
            case .failure(.unallocated):
                let allocated = inbox.allocate()
                lock.unlock()
                guard allocated else { throw .resourceExhausted(errno: ENOMEM) }
                continue
            case .failure(.full):
                break
            }
            guard !Task.isCancelled else {
                lock.unlock()
                throw .cancelled
            }
            if !suspended { state.statistics.sendersBlocked &+= 1 }
            suspended = true
            state.sendersSuspended += 1
            let ticket = state.sendersSuspended
            lock.unlock()
            let wake = await withTaskCancellationHandler {
                await withUnsafeContinuation { (continuation: UnsafeContinuation<SenderWake, Never>) in
                    lock.lock()
                    let now: SenderWake? = !membership.isValid ? .invalidated
                        : inbox.count < queueLimit ? .room
                        : Task.isCancelled ? .cancelled : nil
                    if now == nil { state.suspendedSenders.append(SuspendedSender(ticket: ticket, continuation: continuation)) }
                    lock.unlock()
                    if let now { continuation.resume(returning: now) }
                }
            } onCancel: {
                let cancelled: SuspendedSender? = lock.withLock {
                    guard let index = state.suspendedSenders.firstIndex(where: { $0.ticket == ticket }) else { return nil }
                    return state.suspendedSenders.remove(at: index)
                }
                cancelled?.continuation.resume(returning: .cancelled)
            }
            switch wake {
            case .room: continue
            case .invalidated: throw .invalidPort
            case .cancelled: throw .cancelled
            }
        }
    }
}

/// Why a suspended async sender was resumed.
enum SenderWake: Sendable {
    case room
    case invalidated
    case cancelled
}

/// An async sender suspended on a full port, numbered so that cancellation finds it.
struct SuspendedSender: Sendable {
    let ticket: UInt64
    let continuation: UnsafeContinuation<SenderWake, Never>
}

#if ServiceLifecycle
import RunLoopKit
import ServiceLifecycle

/// A `ResidentThread` run as a swift-service-lifecycle `Service`: the thread and its loop serve
/// ports, timers and sources while the `ServiceGroup` runs, and on graceful shutdown the ports
/// the service drains deliver what is already queued before the thread stops.
///
/// ```swift
/// let worker = ResidentThreadService(name: "worker")
/// let requests = try MessagePort()
/// requests.setHandler { message in … }            // runs on "worker"
/// worker.add(requests)                             // scheduled there, drained at shutdown
/// let group = ServiceGroup(services: [worker], gracefulShutdownSignals: [.sigterm], logger: logger)
/// try ThreadRunLoop.main.run(group)                // see ThreadRunLoop.run(_:)
/// ```
///
/// `run()` lives until graceful shutdown or cancellation:
/// - **Graceful shutdown** (`ServiceGroup.triggerGracefulShutdown()`, a graceful-shutdown signal):
///   the ports given to `add(_:forMode:)` drain — until every queue is empty while the thread's
///   loop is idle, or `drainTimeout` passes — then the thread stops, the ports are invalidated
///   (anything sent later fails with `.invalidPort` instead of waiting for a thread that is
///   gone), and `run()` returns.
/// - **Cancellation** (a cancellation signal, another service failing, the group's own
///   shutdown timeout): no drain; the thread stops at once, the ports are invalidated (what
///   they still held is discarded and counted in `discardedCount`), and `run()` throws
///   `CancellationError`. Cancellation during a drain cuts the drain short.
///
/// The drain watches the loop from its own thread: it ends at a `.beforeWaiting` of a common
/// mode, so ports must be delivered by this thread's loop (a handler or delegate, not a
/// `messages()` consumer elsewhere), and a loop busy in a private mode only stops at the
/// timeout. Messages sent during the drain are delivered if they arrive before the queues are
/// seen empty; a sender that keeps a queue busy is cut off by the timeout.
public final class ResidentThreadService: Service, CustomStringConvertible {
    /// The thread this service runs: add timers, sources and ports to `thread.runLoop`, or
    /// pin actors to `thread.executor`. Any thread; free.
    public let thread: ResidentThread
    /// How long graceful shutdown waits for the ports to drain before it stops the thread
    /// anyway. Any thread; free.
    public let drainTimeout: Duration

    private struct State {
        var ports: [MessagePort] = []
        var started = false
    }

    private let state = Locked(State())

    /// Serves `thread` as a service. The thread is already running; the service only decides
    /// when it stops. Any thread; free.
    public init(thread: ResidentThread, drainTimeout: Duration = .seconds(10)) {
        self.thread = thread
        self.drainTimeout = drainTimeout
    }

    /// Starts a resident thread named `name` (see `ResidentThread.init(name:)`) and serves it as
    /// a service. Any thread; one thread creation, returning once its loop runs.
    public convenience init(name: String, drainTimeout: Duration = .seconds(10)) {
        self.init(thread: ResidentThread(name: name), drainTimeout: drainTimeout)
    }

    /// The thread's run loop. Any thread; free.
    public var runLoop: ThreadRunLoop { thread.runLoop }

    /// Schedules `port` on the thread's loop in `mode` (a no-op if it is there already) and
    /// makes graceful shutdown wait for its queue to drain. Any thread; a lock and the loop's
    /// `add(_:forMode:)`.
    public func add(_ port: MessagePort, forMode mode: ThreadRunLoop.Mode = .default) {
        thread.runLoop.add(port, forMode: mode)
        state.withLock { state in
            if !state.ports.contains(port) { state.ports.append(port) }
        }
    }

    /// The ports graceful shutdown drains, in the order they were added. Any thread; a lock.
    public var ports: [MessagePort] { state.withLock { $0.ports } }

    /// Runs until graceful shutdown (then drains the ports and stops the thread) or
    /// cancellation (then stops the thread and throws `CancellationError`). Called by
    /// `ServiceGroup`, once: a second call is a precondition failure. Any task; it suspends,
    /// except for joining the thread at the end, which blocks until the callout the thread is
    /// running returns.
    public func run() async throws {
        let alreadyStarted = state.withLock { state in
            defer { state.started = true }
            return state.started
        }
        precondition(!alreadyStarted, "\(self).run() was called a second time: a service runs once (give each ServiceGroup its own ResidentThreadService)")

        let cancelled: Bool
        do {
            try await gracefulShutdown()
            cancelled = false
        } catch {
            cancelled = true
        }
        let ports = self.ports
        if !cancelled, !thread.isFinished {
            _ = await PortDrain.wait(for: ports, deliveredBy: thread.runLoop, timeout: drainTimeout)
        }
        thread.stop()
        for port in ports { port.invalidate() }
        if cancelled { throw CancellationError() }
    }

    /// `ResidentThreadService("name")`: how `ServiceGroup` names the service in its logs.
    /// Any thread; free.
    public var description: String { "ResidentThreadService(\"\(thread.name)\")" }
}
#endif

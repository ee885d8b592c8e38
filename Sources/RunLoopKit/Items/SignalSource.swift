#if canImport(Glibc)
import Glibc
#endif

/// Delivers POSIX signals (SIGTERM, SIGHUP, SIGUSR1, …) as run-loop events, on the loop's
/// thread, through a signalfd: no async-signal-safety rules apply to the handler.
///
/// **Block the signals first, in every thread.** The kernel hands a process-directed signal
/// to any thread that does not block it; only when every thread blocks it does it stay
/// pending for the signalfd to read. A signal mask is inherited by threads created later,
/// so call `SignalSource.blockInCurrentThread(_:)` first thing in `main`, before anything
/// starts a thread (a `ResidentThread`, Dispatch, Foundation, the Swift concurrency pool):
///
/// ```swift
/// try SignalSource.blockInCurrentThread([SIGTERM, SIGHUP])   // before any thread exists
/// let worker = ResidentThread(name: "worker")                 // inherits the mask
/// let signals = try SignalSource(signals: [SIGTERM, SIGHUP]) { _, signo in … }
/// signals.add(to: .main, forMode: .default)
/// ```
///
/// `init` also blocks the signals, but only in the calling thread, which is enough for
/// signals sent to that thread alone (`pthread_kill`, `tgkill`). A signal whose disposition
/// is `SIG_IGN` (inherited from the parent across exec, e.g. SIGHUP under `nohup`) is
/// discarded by the kernel and never reaches the source. Standard signals do not queue: one
/// sent again before the loop read it is reported once.
///
/// Lifetime: the source delivers while it is valid and referenced. It stops (and closes its
/// descriptor once the loop has let go of it) on `invalidate()` or when the last reference
/// is dropped, so keep a reference for as long as you want signals.
public final class SignalSource: Sendable {
    /// Why a signal source could not be created or a mask changed.
    public enum Failure: Error, Equatable, Sendable {
        /// Not a valid signal number, or SIGKILL/SIGSTOP, which can be neither caught nor blocked.
        case invalidSignal(Int32)
        /// The process or system ran out of descriptors or memory (EMFILE, ENFILE, ENOMEM).
        case resourceExhausted(errno: Int32)
        /// Any other failure of the underlying system call.
        case systemError(errno: Int32)
    }

    /// The signals this source reports, in the order given to `init`.
    /// Any thread; free.
    public let signals: [Int32]

    private let descriptor: OwnedSignalFD
    private let fileDescriptorSource: FileDescriptorSource

    /// Creates a source for `signals` and blocks them in the calling thread.
    ///
    /// `handler` runs on the thread of the loop the source is added to, once per signal
    /// read, with this source and the signal number. Callable from any thread; costs a
    /// signalfd(2), a pthread_sigmask(3) and one allocation. Throws `.invalidSignal` for a
    /// number that cannot be caught, `.resourceExhausted` when out of descriptors.
    public init(signals: [Int32],
                handler: @escaping @Sendable (SignalSource, Int32) -> Void) throws(Failure) {
        try Self.validate(signals)
        let signalFD: SignalFD
        do {
            signalFD = try SignalFD(signals: signals)
            try SignalFD.block(signals)
        } catch {
            throw Self.failure(error)
        }
        let descriptor = OwnedSignalFD(signalFD)
        self.signals = signals
        self.descriptor = descriptor
        // The handler holds the descriptor (closed when the loop lets go of the handler)
        // and this source weakly (a source nobody references stops delivering).
        let box = WeakSignalSource()
        fileDescriptorSource = FileDescriptorSource(
            fileDescriptor: signalFD.descriptor.rawValue, events: .readable, itemName: "SignalSource", calloutKind: .signal
        ) { _, _ in
            guard let source = box.source else {
                descriptor.signalFD.drain { _ in }   // keep a level-triggered fd from spinning
                return
            }
            descriptor.signalFD.drain { signo in
                if source.isValid { handler(source, signo) }
            }
        }
        box.source = self
    }

    deinit {
        fileDescriptorSource.invalidate()
    }

    /// Blocks `signals` in the calling thread with pthread_sigmask(SIG_BLOCK). Threads the
    /// calling thread creates afterwards inherit the mask, so call it from `main` before
    /// any other thread exists. Any thread; one system call.
    public static func blockInCurrentThread(_ signals: [Int32]) throws(Failure) {
        try validate(signals)
        do { try SignalFD.block(signals) } catch { throw failure(error) }
    }

    /// Unblocks `signals` in the calling thread; any of them still pending is delivered the
    /// ordinary way at once. Any thread; one system call.
    public static func unblockInCurrentThread(_ signals: [Int32]) throws(Failure) {
        try validate(signals)
        do { try SignalFD.unblock(signals) } catch { throw failure(error) }
    }

    /// True when `signal` is blocked in the calling thread. Any thread; one system call.
    public static func isBlockedInCurrentThread(_ signal: Int32) -> Bool {
        SignalFD.isBlocked(signal)
    }

    /// Schedules the source in `mode` of `loop` (`.common` for every common mode). Signals
    /// that arrive while the loop runs another mode wait, in the kernel, until it runs one
    /// that holds the source. Any thread; same cost as adding a `FileDescriptorSource`.
    public func add(to loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode) {
        loop.add(fileDescriptorSource, forMode: mode)
    }

    /// Unschedules the source from `mode` of `loop`; it stays valid. Any thread.
    public func remove(from loop: ThreadRunLoop, forMode mode: ThreadRunLoop.Mode) {
        loop.remove(fileDescriptorSource, forMode: mode)
    }

    /// Stops delivery and removes the source from every loop and mode. The signals stay
    /// blocked (unblock them with `unblockInCurrentThread(_:)` in each thread if you want
    /// the default actions back). Idempotent; any thread.
    public func invalidate() {
        fileDescriptorSource.invalidate()
    }

    /// False once `invalidate()` was called. Any thread; one atomic load.
    public var isValid: Bool { fileDescriptorSource.isValid }

    /// A name for the source's callouts in loop-health reports (`ThreadRunLoop.Callout.label`),
    /// e.g. "shutdown signals". Any thread; a lock.
    public var label: String? {
        get { fileDescriptorSource.label }
        set { fileDescriptorSource.label = newValue }
    }

    private static func validate(_ signals: [Int32]) throws(Failure) {
        if let bad = signals.first(where: { !SignalFD.isCatchable($0) }) {
            throw .invalidSignal(bad)
        }
    }

    private static func failure(_ error: Errno) -> Failure {
        error.isResourceExhaustion ? .resourceExhausted(errno: error.rawValue)
                                   : .systemError(errno: error.rawValue)
    }
}

/// Closes the signalfd when the last holder (the source or its loop handler) lets go.
private final class OwnedSignalFD: Sendable {
    let signalFD: SignalFD
    init(_ signalFD: SignalFD) { self.signalFD = signalFD }
    deinit { signalFD.close() }
}

/// The handler's weak link back to its source, set once right after `init`.
private final class WeakSignalSource: @unchecked Sendable {
    // Written once, on the creating thread, before the source can be added to any loop
    // (adding it publishes this object to the loop's thread through the loop's lock).
    weak var source: SignalSource?
}

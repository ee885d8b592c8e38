import Synchronization

/// How the process that sent a frame was pinned (`MessagePort.Sender.process`).
///
/// A pidfd per frame (SO_PASSPIDFD) installs and closes a descriptor per message, which costs
/// more than the rest of a receive. So a connection pins its sender once and afterwards
/// compares each frame's pid (SCM_CREDENTIALS, which comes anyway) with the pinned process's:
/// a frame that carries that pid was sent by that process as long as the process still held
/// its pid at some moment after the frame was read — a pid is reused only after its process
/// was reaped, and a frame read from a connection was sent before it was read. That check is
/// made when `process` is first asked for, so a daemon that never asks pays nothing for it,
/// and one check covers every frame read before it.
enum SenderPin: Sendable {
    /// The frame came with a pidfd of its sender (SCM_PIDFD), or from the process that made
    /// the connection (SO_PEERPIDFD): no check needed.
    case exact(PinnedProcess)
    /// The frame's pid was the pid of the process its connection is pinned to: confirmed (or
    /// not) the first time it is asked for.
    case pending(PendingPin)

    /// The process, or nil when a pending pin could not be confirmed. Any thread.
    var process: PinnedProcess? {
        switch self {
        case .exact(let process): process
        case .pending(let pending): pending.confirmedProcess
        }
    }
}

/// The frames read from one connection with the pid of `process` since `process` was last
/// checked. Open while frames join; closed by the first thread that asks for the process, which
/// then checks, once for all of them, that the process still holds its pid: every frame that
/// joined was read before the window closed, so before that check. Frames read afterwards join
/// a new window.
final class PendingPin: Sendable {
    let process: PinnedProcess
    /// The process's pid, compared with every frame's: one load fewer than through `process`.
    let pid: Int32
    private let state = Atomic<UInt8>(PendingPin.open)

    private static let open: UInt8 = 0
    private static let checking: UInt8 = 1
    private static let confirmed: UInt8 = 2
    private static let unconfirmed: UInt8 = 3

    init(_ process: PinnedProcess) {
        self.process = process
        pid = process.pid
    }

    /// Adds a frame just read (loop thread): true while the window is open. A read-modify-write,
    /// so that the receive that preceded it is ordered before a check that closes the window
    /// after it: the check then covers the frame.
    func admit() -> Bool {
        state.compareExchange(expected: Self.open, desired: Self.open, ordering: .sequentiallyConsistent).exchanged
    }

    /// A check found that the process no longer holds its pid: frames with its pid can no longer
    /// be told from those of a process that was given it. Any thread; an atomic load.
    var wasRefuted: Bool { state.load(ordering: .relaxed) == Self.unconfirmed }

    /// The process, once confirmed to hold its pid after every frame of the window was read;
    /// nil when it had been reaped by then. The first call closes the window and checks (one
    /// poll(2)); later calls read the verdict. Any thread.
    var confirmedProcess: PinnedProcess? {
        var current = state.load(ordering: .acquiring)
        if current == Self.open {
            let (closed, found) = state.compareExchange(expected: Self.open, desired: Self.checking,
                                                        ordering: .sequentiallyConsistent)
            current = closed ? Self.checking : found
        }
        if current == Self.checking {
            // Two threads may both check; the first verdict stored is everyone's.
            let verdict = process.holdsItsPid ? Self.confirmed : Self.unconfirmed
            let (stored, found) = state.compareExchange(expected: Self.checking, desired: verdict,
                                                        ordering: .acquiringAndReleasing)
            current = stored ? verdict : found
        }
        return current == Self.confirmed ? process : nil
    }
}

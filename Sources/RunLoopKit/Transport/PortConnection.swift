#if canImport(Glibc)
import Glibc
#endif

/// One receive end of a local port's send rights, and what its loop knows about who sends on it.
///
/// Pinning (`SenderPin`): a connection starts with the process that made it, when the kernel
/// can say (a named connection's SO_PEERPIDFD: the process that connected), and otherwise with
/// SO_PASSPIDFD on, so that its first frames bring pidfds of their senders (a socketpair's
/// SO_PEERPIDFD names this process, which made both ends). Once two frames in a row come from
/// one process, SO_PASSPIDFD goes off: later frames with that process's pid join its pending
/// pin. A frame with another pid — the send right was handed on, or is shared — is reported
/// unpinned (`process` nil), and SO_PASSPIDFD goes on again so that the frames after it are
/// pinned; the same happens once the pinned process is found reaped. Where the kernel refuses
/// SO_PASSPIDFD (before 6.5), frames are pinned only through the process that connected.
///
/// The descriptor is closed only by the loop thread (see `PortConnections`); the pinning state
/// is the loop thread's alone.
final class PortConnection: @unchecked Sendable {
    let socket: SeqPacketSocket
    let token = Source1Token.next()
    /// For a connection made through a published name: its policy and the process that connected.
    let named: NamedPeer?

    @exclusivity(unchecked) private var pinned: PendingPin?
    /// SO_PASSPIDFD is on: every frame read comes with a pidfd of its sender.
    @exclusivity(unchecked) private var passing: Bool
    /// The kernel refused to switch SO_PASSPIDFD: it is left as it is.
    @exclusivity(unchecked) private var passingFixed = false

    /// What a connection made through a published name keeps about how it was made.
    struct NamedPeer {
        /// The publisher's policy, checked for every frame (named-ports.md §5.5).
        let access: MessagePort.Access
        /// The process that connected (SO_PEERCRED, and SO_PEERPIDFD where the kernel gives it).
        let connector: MessagePort.Sender
    }

    /// A socketpair end made by this process (its peer is handed out as a send right): its
    /// senders are unknown, so its first frames bring pidfds. Call before the other end exists
    /// anywhere else. Any thread; one setsockopt(2).
    init(madeHere socket: SeqPacketSocket) {
        self.socket = socket
        named = nil
        passing = (try? socket.setPassProcess(true)) != nil
        passingFixed = !passing
    }

    /// An accepted connection that passed the handshake, pinned to the process that connected
    /// where the kernel could say which (`connector.process`). Loop thread.
    init(accepted socket: SeqPacketSocket, access: MessagePort.Access, connector: MessagePort.Sender) {
        self.socket = socket
        named = NamedPeer(access: access, connector: connector)
        passing = false
        if case .exact(let process)? = connector.pin {
            pinned = PendingPin(process)
        } else {
            setPassing(true)
        }
    }

    /// The sender of a record just read, with `credentials`, pinned as far as the kernel allows;
    /// takes ownership of the record's pidfd. Loop thread.
    @inline(__always)
    func sender(_ credentials: Credentials, process received: Result<ProcessDescriptor, Errno>?) -> MessagePort.Sender {
        // The usual frame: no pidfd of its own, from the process the connection is pinned to,
        // whose window of frames is open.
        if received == nil, let current = pinned, current.pid == credentials.pid, current.admit() {
            return MessagePort.Sender(credentials, pin: .pending(current))
        }
        return MessagePort.Sender(credentials, pin: pin(credentials.pid, received))
    }

    @inline(never)
    private func pin(_ pid: pid_t, _ received: Result<ProcessDescriptor, Errno>?) -> SenderPin? {
        if let received {
            // SO_PASSPIDFD was on. A failure (the sender reaped before this read on a kernel
            // that kept nothing of it, or no descriptor left) leaves this frame unpinned.
            guard case .success(let descriptor) = received else { return nil }
            let process = PinnedProcess(adopting: descriptor, pid: pid)
            if let pinned, pinned.process == process {
                // Two frames in a row from one process: it is this connection's sender now.
                setPassing(false)
                return .exact(pinned.process)
            }
            pinned = PendingPin(process)
            return .exact(process)
        }
        guard let current = pinned, current.pid == pid else {
            setPassing(true)
            return nil
        }
        if current.admit() { return .pending(current) }
        guard !current.wasRefuted else {
            pinned = nil
            setPassing(true)
            return nil
        }
        // The window was checked (or is being checked): this frame opens the next one.
        let next = PendingPin(current.process)
        pinned = next
        _ = next.admit()
        return .pending(next)
    }

    /// Closes the descriptor and lets go of the pinned process's pidfd. Loop thread (or the
    /// port's deinit), once.
    func close() {
        socket.close()
        pinned = nil
    }

    /// SO_PASSRIGHTS: whether the kernel lets frames with descriptors onto this connection. A
    /// kernel without it (before 6.16) leaves them to the reader, which drops them. Any thread
    /// holding the port's lock (which keeps the descriptor open).
    func acceptDescriptors(_ on: Bool) {
        try? socket.setAcceptsDescriptors(on)
    }

    private func setPassing(_ on: Bool) {
        guard passing != on, !passingFixed else { return }
        do {
            try socket.setPassProcess(on)
            passing = on
        } catch {
            passingFixed = true
        }
    }
}

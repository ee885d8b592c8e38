#if canImport(Glibc)
import Glibc
#endif

/// One receive end of a local port's send rights, and what its loop knows about who sends on it.
///
/// Pinning: a connection starts with the process that made it, when the kernel can say (a named
/// connection's SO_PEERPIDFD: the process that connected), and otherwise with SO_PASSPIDFD on,
/// so that its first frames bring pidfds of their senders (a socketpair's SO_PEERPIDFD names
/// this process, which made both ends). Once two frames in a row come from one process,
/// SO_PASSPIDFD goes off: a later frame with that process's pid is that process's when the
/// process still holds its pid as the frame is read — one poll(2), much less than a pidfd
/// installed and closed per frame — since a pid is given to another process only after its
/// process was reaped, and a frame read was sent before. So the frames a process sent just
/// before it exited, or before it handed its send right on, stay pinned to it (§3.51).
///
/// A frame with a pid the connection is not pinned to — the send right was handed on, or is
/// shared — is pinned to the process that holds that pid as it is read (pidfd_open(2)), and
/// SO_PASSPIDFD goes on again so that the frames after it bring their own pidfd. Where the
/// kernel refuses SO_PASSPIDFD (before 6.5), only frames from the process that connected are
/// pinned.
///
/// The descriptor is closed only by the loop thread (see `PortConnections`); the pinning state
/// is the loop thread's alone.
final class PortConnection: @unchecked Sendable {
    let socket: SeqPacketSocket
    let token = Source1Token.next()
    /// For a connection made through a published name: its policy and the process that connected.
    let named: NamedPeer?

    @exclusivity(unchecked) private var pinned: PinnedProcess?
    /// SO_PASSPIDFD is on: every frame read comes with a pidfd of its sender.
    @exclusivity(unchecked) private var passing: Bool
    /// The kernel refused to switch SO_PASSPIDFD: it is left as it is.
    @exclusivity(unchecked) private var passingFixed = false
    /// The last process other than the connector whose frames passed `refusal(of:)`: its pid
    /// namespace was looked at once.
    @exclusivity(unchecked) private var vetted: PinnedProcess?

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
        if let process = connector.pin {
            pinned = process
        } else {
            setPassing(true)
        }
    }

    /// The sender of a record just read, with `credentials`, pinned as far as the kernel allows;
    /// takes ownership of the record's pidfd. Loop thread.
    @inline(__always)
    func sender(_ credentials: Credentials, process received: Result<ProcessDescriptor, Errno>?) -> MessagePort.Sender {
        // The usual frame: no pidfd of its own, from the process the connection is pinned to,
        // which still holds its pid now that the frame has been read.
        if received == nil, let current = pinned, current.pid == credentials.pid {
            if current.holdsItsPid { return MessagePort.Sender(credentials, pin: current) }
            return MessagePort.Sender(credentials, pin: pinAfterReaping(current))
        }
        return MessagePort.Sender(credentials, pin: pin(credentials.pid, received))
    }

    /// A frame with the pid of the process the connection is pinned to, read after that process
    /// was reaped. While no process holds the pid, the frame is that process's, sent before it
    /// exited: another sender would have had to be given the pid after a whole turn of the pid
    /// space, send, and be reaped again before this read — and a pin to a reaped process points
    /// no action (a signal, a cgroup look-up) at a live one. While a process holds the pid (the
    /// sender itself, exited and not reaped, on a kernel that does not tell the two apart), the
    /// frame is pinned as one with a pid the connection is not pinned to. One kill(2).
    @inline(never)
    private func pinAfterReaping(_ process: PinnedProcess) -> PinnedProcess? {
        ProcessDescriptor.isHeld(process.pid) ? pin(process.pid, nil) : process
    }

    @inline(never)
    private func pin(_ pid: pid_t, _ received: Result<ProcessDescriptor, Errno>?) -> PinnedProcess? {
        if let received {
            // SO_PASSPIDFD was on. A failure (the sender reaped before this read on a kernel
            // that kept nothing of it, or no descriptor left) leaves this frame unpinned.
            guard case .success(let descriptor) = received else { return nil }
            let process = PinnedProcess(adopting: descriptor, pid: pid)
            if let pinned, pinned == process {
                // Two frames in a row from one process: it is this connection's sender now.
                setPassing(false)
                return pinned
            }
            pinned = process
            return process
        }
        // A pid the connection is not pinned to, or whose process no longer holds it: the
        // process holding it now sent the frame, unless the sender was reaped and its pid given
        // to another between the send and this read. The next frames bring their own pidfd. A
        // kernel without SO_PASSPIDFD (before 6.5) pins only the process that connected.
        setPassing(true)
        guard !passingFixed else { return nil }
        pinned = try? PinnedProcess(pid: pid)
        return pinned
    }

    /// Why a frame from `sender` must not be delivered on this named connection, or nil (nil
    /// for a socketpair: its send rights are capabilities this process handed out). Loop thread.
    ///
    /// - The publisher's policy admits the sender, whoever holds the socket now (named-ports.md §5.5).
    /// - A frame claiming this process while another process connected is this process's own
    ///   when this process sent frames into its own names' connections (a client's connection
    ///   given to it as a reply port, §3.60); otherwise only CAP_SYS_ADMIN could claim it (§3.32).
    /// - A frame from a process other than the one that connected is refused when that process
    ///   lives in a pid namespace below this one's (§3.61): from a user namespace it made, any
    ///   process of that namespace's tree may name it without privilege, and the kernel's pidfd
    ///   (SCM_PIDFD) follows the pid claimed. The connector is recorded by the kernel at connect(2).
    func refusal(of sender: MessagePort.Sender?) -> PortError? {
        guard let named else { return nil }
        guard let sender, named.access.admits(sender) else { return .accessDenied }
        let connector = named.connector
        guard sender.pid != connector.pid else { return nil }
        if sender.pid == MessagePort.Sender.thisProcess {
            return OwnReturns.claim() ? nil : .forgedCredentials
        }
        guard let process = sender.pin, process !== vetted else { return nil }
        if process.livesInNestedPidNamespace { return .forgedCredentials }
        vetted = process
        return nil
    }

    /// Closes the descriptor and lets go of the pinned process's pidfd. Loop thread (or the
    /// port's deinit), once.
    func close() {
        socket.close()
        pinned = nil
        vetted = nil
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

import Synchronization

/// Frames this process sends into connections of its own published names (§3.60).
///
/// A client may hand a daemon the daemon's own connection — its named connection, given as a
/// reply port — and the daemon's reply then comes back to the daemon, over a connection
/// another process made, with the daemon's pid. That frame is the daemon's own. Any other frame
/// claiming this process over such a connection can only be forged (CAP_SYS_ADMIN, §3.32), and
/// the kernel cannot tell the two apart: SCM_CREDENTIALS and SCM_PIDFD both name the pid
/// claimed. This process can: a proxy made from a received descriptor whose peer is one of this
/// process's listeners is marked (one getpeername(2), only while this process publishes a
/// name), every frame sent through it is counted, and every frame that claims this process on
/// a named connection another process made must match one counted.
enum OwnReturns {
    /// The abstract addresses this process's listeners are bound to, with how many listen there.
    private static let addresses = Locked<[[UInt8]: Int]>([:])
    /// How many listeners this process has: while none, no proxy is looked at.
    private static let listenerCount = Atomic<Int>(0)
    /// Frames sent through marked proxies and not yet read by this process.
    private static let inFlight = Atomic<Int>(0)

    /// A listener of this process is bound to `address`. Any thread; a lock.
    static func listening(at address: [UInt8]) {
        addresses.withLock { $0[address, default: 0] += 1 }
        listenerCount.add(1, ordering: .sequentiallyConsistent)
    }

    /// The listener bound to `address` closed. Any thread; a lock.
    static func stoppedListening(at address: [UInt8]) {
        addresses.withLock { table in
            let left = table[address, default: 1] - 1
            table[address] = left > 0 ? left : nil
        }
        listenerCount.subtract(1, ordering: .sequentiallyConsistent)
    }

    /// Whether frames sent through `socket` reach a listener of this process: free while this
    /// process listens nowhere, otherwise one getpeername(2) and a lock. Any thread.
    static func returnsHere(_ socket: SeqPacketSocket) -> Bool {
        guard listenerCount.load(ordering: .relaxed) > 0, let peer = socket.peerAbstractName else { return false }
        return addresses.withLock { $0[peer] != nil }
    }

    /// A marked proxy is about to send a frame (`sent: true`), or did not after all (`false`).
    /// Any thread; one atomic add.
    static func sending(_ sent: Bool) {
        if sent { inFlight.add(1, ordering: .sequentiallyConsistent) } else { inFlight.subtract(1, ordering: .sequentiallyConsistent) }
    }

    /// Takes one frame counted by `sending`: true when there was one. Loop thread.
    static func claim() -> Bool {
        var current = inFlight.load(ordering: .sequentiallyConsistent)
        while current > 0 {
            let (exchanged, found) = inFlight.compareExchange(expected: current, desired: current - 1,
                                                              ordering: .sequentiallyConsistent)
            if exchanged { return true }
            current = found
        }
        return false
    }
}

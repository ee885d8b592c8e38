/// The fd sources of one mode that watch one descriptor, and that descriptor's one
/// registration in the mode's epoll set.
///
/// epoll takes a descriptor once per set, so several sources on one descriptor (a reader and a
/// writer, or two libraries watching the same socket) share a registration whose interest is
/// the union of their events; each event goes to every source whose events it matches, in
/// ascending `order` (insertion order among equals), as GLib dispatches several `GPollFD`s on
/// one descriptor. A descriptor epoll refuses (EPERM: a regular file, /dev/null) has no
/// registration: poll(2) reports such a file always ready, and so does the loop.
///
/// A value kept in `ModeState`, under the loop's state lock. Inserting or removing costs
/// O(sources on this descriptor).
struct DescriptorWatch {
    /// The epoll token of the registration (unique per descriptor per mode, so a stale event
    /// of a registration that has since been removed finds nothing).
    let token: UInt64
    /// Ascending `order`, insertion order among equals.
    private(set) var sources: [FileDescriptorSource] = []
    /// False when epoll refused the descriptor: it is then ready at once in every pass.
    var pollable = true
    /// What the epoll set was last told to watch for. Kept rather than recomputed, because a
    /// source's events can change (`FileDescriptorSource.events`) between the store and the
    /// loop's reconciling of the registration: comparing against the sources' current union
    /// alone would miss that change.
    var registered: Epoll.Interest = []

    init(token: UInt64) {
        self.token = token
    }

    /// What the registration must ask epoll for: the union of the sources' current events.
    var interest: Epoll.Interest {
        var interest: Epoll.Interest = []
        for source in sources {
            let events = source.events
            if events.contains(.readable) { interest.insert(.readable) }
            if events.contains(.writable) { interest.insert(.writable) }
        }
        return interest
    }

    mutating func insert(_ source: FileDescriptorSource) {
        // After every source of the same order: stable.
        var low = 0, high = sources.count
        while low < high {
            let middle = (low + high) / 2
            if sources[middle].order <= source.order { low = middle + 1 } else { high = middle }
        }
        sources.insert(source, at: low)
    }

    /// False when `source` is not one of this descriptor's sources.
    mutating func remove(_ source: FileDescriptorSource) -> Bool {
        guard let index = sources.firstIndex(where: { $0 === source }) else { return false }
        sources.remove(at: index)
        return true
    }

    func contains(_ source: FileDescriptorSource) -> Bool {
        sources.contains { $0 === source }
    }
}

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
/// A value kept in `ModeState`, under the loop's state lock. Inserting, removing or recounting
/// a source costs O(sources on this descriptor) in moves and identity comparisons; the interest
/// is kept counted, so it costs O(1) however many sources share the descriptor.
struct DescriptorWatch {
    /// The epoll token of the registration (unique per descriptor per mode, so a stale event
    /// of a registration that has since been removed finds nothing).
    let token: UInt64
    /// Ascending `order`, insertion order among equals.
    private(set) var sources: [FileDescriptorSource] = []
    /// The events each of `sources` was counted with. A source's events can change between the
    /// store and the loop's recount (`FileDescriptorSource.events` is set on any thread), so a
    /// removal takes away what was counted, not what the source asks for now.
    private var counted: [FileDescriptorSource.Events] = []
    private var readers = 0
    private var writers = 0
    /// False when epoll refused the descriptor: it is then ready at once in every pass.
    var pollable = true
    /// What the epoll set was last told to watch for. Kept rather than recomputed, because the
    /// interest can change (a recount) between a registration and the loop's reconciling of it.
    var registered: Epoll.Interest = []

    init(token: UInt64) {
        self.token = token
    }

    /// What the registration must ask epoll for: the union of the sources' counted events.
    var interest: Epoll.Interest {
        var interest: Epoll.Interest = []
        if readers > 0 { interest.insert(.readable) }
        if writers > 0 { interest.insert(.writable) }
        return interest
    }

    mutating func insert(_ source: FileDescriptorSource) {
        // After every source of the same order: stable.
        var low = 0, high = sources.count
        while low < high {
            let middle = (low + high) / 2
            if sources[middle].order <= source.order { low = middle + 1 } else { high = middle }
        }
        let events = source.events
        sources.insert(source, at: low)
        counted.insert(events, at: low)
        count(events, +1)
    }

    /// False when `source` is not one of this descriptor's sources.
    mutating func remove(_ source: FileDescriptorSource) -> Bool {
        guard let index = sources.firstIndex(where: { $0 === source }) else { return false }
        sources.remove(at: index)
        count(counted.remove(at: index), -1)
        return true
    }

    /// Counts `source` with the events it asks for now; false when it is not one of this
    /// descriptor's sources.
    mutating func recount(_ source: FileDescriptorSource) -> Bool {
        guard let index = sources.firstIndex(where: { $0 === source }) else { return false }
        let events = source.events
        count(counted[index], -1)
        counted[index] = events
        count(events, +1)
        return true
    }

    private mutating func count(_ events: FileDescriptorSource.Events, _ delta: Int) {
        if events.contains(.readable) { readers += delta }
        if events.contains(.writable) { writers += delta }
    }
}

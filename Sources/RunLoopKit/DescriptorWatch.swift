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
    private var readers = 0
    private var writers = 0

    init(token: UInt64) {
        self.token = token
    }

    /// What the registration asks epoll for: the union of the sources' events.
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
        sources.insert(source, at: low)
        count(source, +1)
    }

    /// False when `source` is not one of this descriptor's sources.
    mutating func remove(_ source: FileDescriptorSource) -> Bool {
        guard let index = sources.firstIndex(where: { $0 === source }) else { return false }
        sources.remove(at: index)
        count(source, -1)
        return true
    }

    private mutating func count(_ source: FileDescriptorSource, _ delta: Int) {
        if source.events.contains(.readable) { readers += delta }
        if source.events.contains(.writable) { writers += delta }
    }
}

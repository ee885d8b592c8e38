/// What each epoll token of a mode stands for, as an item snapshot looks it up for every event
/// a wait reports: an open-addressing table over the tokens with a multiplicative hash.
///
/// A `Dictionary<UInt64, Source1>` costs a SipHash of the token per lookup (about 140
/// instructions, as much again as the rest of handling the event): with hundreds of busy
/// connections, each an fd source, that was a sizeable share of a network thread's pass.
/// Tokens are distinct counters handed out by `Source1Token` (never 0, the loop's own doorbell,
/// which is never stored here), so multiplying by the golden ratio spreads them well and 0
/// marks an empty slot. Built once per snapshot (O(n), only after an item was added or removed)
/// and never changed; any thread may read it.
struct Source1Table: Sendable {
    private let tokens: [UInt64]
    private let sources: [Source1?]
    private let shift: UInt64

    /// The table of `entries`; at most half full, so that a probe ends after a slot or two.
    init(_ entries: [UInt64: Source1]) {
        var capacity = 8
        var bits: UInt64 = 3
        while capacity < 2 * entries.count {
            capacity *= 2
            bits += 1
        }
        shift = 64 - bits
        var tokens = [UInt64](repeating: 0, count: capacity)
        var sources = [Source1?](repeating: nil, count: capacity)
        for (token, source) in entries {
            precondition(token != 0, "RunLoopKit: epoll token 0 is the loop's doorbell, never an item's")
            var slot = Self.slot(of: token, shift: shift)
            while tokens[slot] != 0 { slot = (slot + 1) & (capacity - 1) }
            tokens[slot] = token
            sources[slot] = source
        }
        self.tokens = tokens
        self.sources = sources
    }

    /// The Source1 registered under `token`, or nil. O(1): one multiplication and a probe.
    func source(for token: UInt64) -> Source1? {
        let mask = tokens.count - 1
        var slot = Self.slot(of: token, shift: shift)
        while true {
            let found = tokens[slot]
            if found == token { return sources[slot] }
            if found == 0 { return nil }
            slot = (slot + 1) & mask
        }
    }

    @inline(__always)
    private static func slot(of token: UInt64, shift: UInt64) -> Int {
        Int(truncatingIfNeeded: (token &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }
}

import Synchronization

/// The string key/values an instrument injects into a message (W3C `traceparent`, `tracestate`,
/// `baggage`): what carries a sender's context to the handler of its message, in this process
/// and across processes (Protocols/port-message-frame.md §3.6, the METADATA section). The core
/// never reads them; an adapter (RunLoopKitTracing) writes them at the send and reads them
/// around the delivery through ``MessageContext``.
package struct MessageMetadata: Sendable, Equatable {
    /// One key/value, in the order the instrument injected it.
    package struct Field: Sendable, Equatable {
        package var key: String
        package var value: String

        package init(key: String, value: String) {
            self.key = key
            self.value = value
        }
    }

    package var fields: [Field]

    package init(_ fields: [Field] = []) {
        self.fields = fields
    }

    /// The value of the first field named `key`. Linear: an instrument injects a handful.
    package subscript(key: String) -> String? {
        fields.first { $0.key == key }?.value
    }

    /// Sets `key` to `value`, replacing an earlier field of that name (an injector that
    /// injects a key twice means the last value, as an HTTP header field set twice).
    package mutating func set(_ value: String, for key: String) {
        if let index = fields.firstIndex(where: { $0.key == key }) {
            fields[index].value = value
        } else {
            fields.append(Field(key: key, value: value))
        }
    }

    /// The fields within the frame's limits (the first 16 whose key and value fit), or nil when
    /// none is: what a send carries, so that a message never fails for its instrument's sake.
    package func bounded() -> MessageMetadata? {
        var kept: [Field] = []
        for field in fields where kept.count < Self.maximumFields {
            let key = field.key.utf8.count
            if key >= 1, key <= Self.maximumKeyLength, field.value.utf8.count <= Self.maximumValueLength {
                kept.append(field)
            }
        }
        if kept.isEmpty { return nil }
        return kept.count == fields.count ? self : MessageMetadata(kept)
    }

    /// The METADATA section's size in a frame, or nil when the fields are outside its limits.
    var frameSectionSize: Int? {
        guard !fields.isEmpty, fields.count <= Self.maximumFields else { return nil }
        var size = 2
        for field in fields {
            let key = field.key.utf8.count
            let value = field.value.utf8.count
            guard key >= 1, key <= Self.maximumKeyLength, value <= Self.maximumValueLength else { return nil }
            size += 4 + key + value
        }
        return size
    }

    /// At most this many fields travel in a frame (Protocols/port-message-frame.md §3.5).
    package static let maximumFields = 16
    /// The longest key, in UTF-8 bytes.
    package static let maximumKeyLength = 256
    /// The longest value, in UTF-8 bytes.
    package static let maximumValueLength = 4096
}

/// What an instrumentation adapter installs: how a sender's context becomes a message's
/// metadata, and how a message's metadata becomes the context its handler runs within.
package protocol MessageContextPropagator: AnyObject, Sendable {
    /// The metadata to attach to a message sent now, or nil for none (no context is current).
    /// Called on the sending thread (within the sending task, for an async send).
    func metadataForSend() -> MessageMetadata?

    /// Runs `body` within the context `metadata` carries (nil: a message that carries none).
    /// Called on the receiving loop's thread around each handler, delegate and batch-handler
    /// callout of a port.
    func withContext<Result>(of metadata: MessageMetadata?, _ body: () throws -> Result) rethrows -> Result

    /// Runs `body` within a span named `name` — of a distributed call's target: a client span
    /// around the call in the caller (`isClient`), a server span around its execution in the
    /// callee — which records what `body` throws. The calling task.
    func withSpan<Result>(named name: String, isClient: Bool, _ body: () async throws -> Result) async rethrows -> Result
}

/// The one place the core consults an installed ``MessageContextPropagator``. Nothing installed
/// (the default) costs one atomic load per send and per delivery, and adds nothing to a message.
package enum MessageContext {
    fileprivate final class Installed: Sendable {
        let propagator: any MessageContextPropagator
        init(_ propagator: any MessageContextPropagator) { self.propagator = propagator }
    }

    /// The installed propagator, retained for the life of the process once stored. A plain atomic
    /// word: `AtomicLazyReference.load()` is not inlined across the Synchronization library, and
    /// each call went through its generic `Optional.map` and a metadata look-up — about 250
    /// instructions per send and per delivery with nothing installed (callgrind), a third of a
    /// local stream's cost.
    private static let installedObject = Atomic<UInt>(0)

    /// The installed propagator's holder, nil when none is. Any thread; one atomic load.
    @inline(__always)
    fileprivate static var installed: Installed? {
        guard let object = UnsafeRawPointer(bitPattern: installedObject.load(ordering: .acquiring)) else { return nil }
        return Unmanaged<Installed>.fromOpaque(object).takeUnretainedValue()
    }

    /// Installs `propagator` for the whole process; the first installation wins, later ones are
    /// ignored (returns whether this one was installed). Any thread.
    @discardableResult
    package static func install(_ propagator: any MessageContextPropagator) -> Bool {
        let candidate = Unmanaged.passRetained(Installed(propagator))
        let (stored, _) = installedObject.compareExchange(expected: 0, desired: UInt(bitPattern: candidate.toOpaque()),
                                                          ordering: .acquiringAndReleasing)
        if !stored { candidate.release() }
        return stored
    }

    /// Runs `body` as if no propagator were installed, and puts it back: the Benchmarks measure
    /// an installed instrument against none in alternation, in one process (installation is
    /// once per process). The propagator stays retained, so a send or delivery that read it just
    /// before finishes with it. Any thread; two atomic exchanges.
    package static func withoutPropagator<Result>(_ body: () throws -> Result) rethrows -> Result {
        let object = installedObject.exchange(0, ordering: .acquiringAndReleasing)
        defer { installedObject.store(object, ordering: .releasing) }
        return try body()
    }

    /// Whether a propagator is installed. Any thread; one atomic load.
    package static var isInstalled: Bool { installedObject.load(ordering: .acquiring) != 0 }

    /// The metadata for a message sent now: nil unless a propagator is installed and has a
    /// context to carry. Sending thread; one atomic load when nothing is installed.
    @inline(__always)
    package static func metadataForSend() -> MessageMetadata? {
        guard let installed else { return nil }
        return installed.propagator.metadataForSend()?.bounded()
    }

    /// Runs `body` within the context `metadata` carries, when a propagator is installed; else
    /// just runs it, without reading `metadata`. Loop thread (or any thread that hands a message
    /// to user code).
    @inline(__always)
    package static func withContext<Result>(of metadata: @autoclosure () -> MessageMetadata?,
                                            _ body: () throws -> Result) rethrows -> Result {
        guard let installed else { return try body() }
        return try installed.propagator.withContext(of: metadata(), body)
    }
}

extension MessageContext {
    /// Runs `body` within a span named `name()` when a propagator is installed (the name is
    /// made only then); else just runs it. The calling task.
    package static func withSpan<Result>(named name: @autoclosure () -> String, isClient: Bool,
                                         _ body: () async throws -> Result) async rethrows -> Result {
        guard let installed else { return try await body() }
        return try await installed.propagator.withSpan(named: name(), isClient: isClient, body)
    }
}

extension MessagePort.Message {
    /// A message sent in this process (or through a bridge), with the metadata of its send.
    init(msgid: UInt32, payload: Payload, replyPort: MessagePort?, metadata: MessageMetadata?) {
        self.init(msgid: msgid, replyPort: replyPort, payload: payload, metadata: metadata)
    }
}

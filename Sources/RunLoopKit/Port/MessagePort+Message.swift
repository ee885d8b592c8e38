import FoundationEssentials

extension MessagePort {
    /// A message: a 32-bit id plus components (Data or ports) and an optional reply port,
    /// as a Mach message or an NSPortMessage carries. A value type; copying it copies
    /// references to the components, never their bytes.
    public struct Message: Sendable, CustomStringConvertible {
        /// One component of a message.
        public enum Component: Sendable {
            /// Bytes; across processes, inside the frame up to `MessagePort.inlineDataLimit`, as
            /// sealed memory above it (see ``SealedMemory``).
            case data(Data)
            /// A port; across processes, its send right travels as a descriptor (SCM_RIGHTS).
            case port(MessagePort)
        }

        /// The message id the sender chose. Any thread; free.
        public var msgid: UInt32
        /// The components, in the order sent. Any thread. Free, except for a message of one
        /// Data component (the common case, which is stored without an array): reading it builds
        /// a one-element array, which the optimizer removes when the array does not escape.
        public var components: [Component] {
            @inlinable get { payload.components }
            @inlinable set { payload = .components(newValue) }
        }
        /// The sender's `from:` port: where a reply should go. Any thread; free.
        public var replyPort: MessagePort?
        /// The process that sent the frame, as the kernel reported it; nil for a message sent in
        /// this process (read through `sender`).
        var kernelSender: MessagePort.Sender?
        /// Who sent it when a bridge to another transport delivered it (RunLoopKitGRPC's verified
        /// remote peer); nil otherwise. A bridge's own type, read through the bridge's accessor.
        package var origin: (any AnyObject & Sendable)?
        /// The components as stored.
        @usableFromInline var payload: Payload
        /// What an installed instrument attached at the send (``MessageContext``): the sender's
        /// trace context. Nil when nothing is installed or no context was current.
        package var metadata: MessageMetadata?

        /// The Data component at `index`, or nil when there is none or it is a port. Any thread; O(1).
        /// Inlined, so that a receiver's checks of a one-Data message fold into one test of how it
        /// is stored.
        @inlinable
        public func data(at index: Int) -> Data? {
            switch payload {
            case .data(let data): index == 0 ? data : nil
            case .components(let components):
                if components.indices.contains(index), case .data(let data) = components[index] { data } else { nil }
            }
        }

        /// The port component at `index`, or nil when there is none or it is Data. Any thread; O(1).
        @inlinable
        public func port(at index: Int) -> MessagePort? {
            guard case .components(let components) = payload, components.indices.contains(index),
                  case .port(let port) = components[index] else { return nil }
            return port
        }

        /// The first Data component, the common single-payload case. Any thread; O(components).
        @inlinable
        public var data: Data? {
            switch payload {
            case .data(let data): data
            case .components(let components):
                components.lazy.compactMap { if case .data(let d) = $0 { d } else { nil } }.first
            }
        }

        /// The msgid and each component's kind and size, for logs. Any thread; allocates the string.
        public var description: String {
            let parts = components.map { component -> String in
                switch component {
                case .data(let data): "data(\(data.count) bytes)"
                case .port(let port): "port(\(port))"
                }
            }
            let reply = replyPort.map { ", reply: \($0)" } ?? ""
            return "Message(msgid: \(msgid), components: [\(parts.joined(separator: ", "))]\(reply))"
        }
    }
}

extension MessagePort.Message {
    /// A message with `msgid`, `components` and an optional reply port. Any thread.
    public init(msgid: UInt32, components: [Component] = [], replyPort: MessagePort? = nil) {
        self.init(msgid: msgid, replyPort: replyPort, payload: .components(components))
    }

    /// A message with its components as stored. Every initializer goes through the memberwise
    /// one (they are in an extension so that the struct keeps it), which builds the value in one
    /// step: one assigning the fields of `self` leaves a copy and a destroy of the whole message
    /// that the optimizer does not remove (a retain and a release of its Data per `send`).
    @usableFromInline
    init(msgid: UInt32, payload: Payload, replyPort: MessagePort?) {
        self.init(msgid: msgid, replyPort: replyPort, payload: payload)
    }

    /// A message read from a frame, with the sender the kernel reported.
    init(msgid: UInt32, payload: Payload, replyPort: MessagePort?, sender: MessagePort.Sender?,
         metadata: MessageMetadata? = nil) {
        self.init(msgid: msgid, replyPort: replyPort, kernelSender: sender, payload: payload, metadata: metadata)
    }

    /// How a message keeps its components: one Data alone needs no array, so a sender's
    /// `[.data(bytes)]` literal can be optimized away and the message carries only the Data.
    @usableFromInline
    enum Payload: Sendable {
        case data(Data)
        case components([Component])

        /// The components of a `send`, from the caller's array. Inlined into the caller so that a
        /// literal `[.data(bytes)]` never reaches the heap: the array is only read here. Several
        /// components are copied into an array of the message's own, so that the caller's array
        /// does not escape either (a literal then stays on the stack).
        @inlinable @inline(__always)
        init(sending components: [Component]) {
            if components.count == 1, case .data(let data) = components[0] {
                self = .data(data)
            } else if components.isEmpty {
                self = .components([])
            } else {
                self = .components(components.withUnsafeBufferPointer { Array($0) })
            }
        }

        /// The components as an array (a new one-element array for `.data`).
        @inlinable
        var components: [Component] {
            switch self {
            case .data(let data): [.data(data)]
            case .components(let components): components
            }
        }
    }
}

extension MessagePort.Message.Component: FrameComponent {
    var frameDataLength: Int? {
        if case .data(let data) = self { data.count } else { nil }
    }

    func copyFrameData(into destination: UnsafeMutableRawBufferPointer) {
        if case .data(let data) = self { data.withUnsafeBytes { destination.copyMemory(from: $0) } }
    }
}

import FoundationEssentials

extension MessagePort {
    /// A message: a 32-bit id plus components (Data or ports) and an optional reply port,
    /// as a Mach message or an NSPortMessage carries. A value type; copying it copies
    /// references to the components, never their bytes.
    public struct Message: Sendable, CustomStringConvertible {
        /// One component of a message.
        public enum Component: Sendable {
            /// Bytes; across processes, copied into the frame.
            case data(Data)
            /// A port; across processes, its send right travels as a descriptor (SCM_RIGHTS).
            case port(MessagePort)
        }

        /// The message id the sender chose. Any thread; free.
        public var msgid: UInt32
        /// The components, in the order sent. Any thread; free.
        public var components: [Component]
        /// The sender's `from:` port: where a reply should go. Any thread; free.
        public var replyPort: MessagePort?
        /// The process that sent the frame, as the kernel reported it; nil for a message sent in
        /// this process (read through `sender`).
        var kernelSender: MessagePort.Sender?
        /// Who sent it when a bridge to another transport delivered it (RunLoopKitGRPC's verified
        /// remote peer); nil otherwise. A bridge's own type, read through the bridge's accessor.
        package var origin: (any AnyObject & Sendable)?

        /// A message with `msgid`, `components` and an optional reply port. Any thread.
        public init(msgid: UInt32, components: [Component] = [], replyPort: MessagePort? = nil) {
            self.msgid = msgid
            self.components = components
            self.replyPort = replyPort
        }

        /// A message read from a frame, with the sender the kernel reported.
        init(msgid: UInt32, components: [Component], replyPort: MessagePort?, sender: MessagePort.Sender?) {
            self.msgid = msgid
            self.components = components
            self.replyPort = replyPort
            kernelSender = sender
        }

        /// The Data component at `index`, or nil when there is none or it is a port. Any thread; O(1).
        public func data(at index: Int) -> Data? {
            guard components.indices.contains(index), case .data(let data) = components[index] else { return nil }
            return data
        }

        /// The port component at `index`, or nil when there is none or it is Data. Any thread; O(1).
        public func port(at index: Int) -> MessagePort? {
            guard components.indices.contains(index), case .port(let port) = components[index] else { return nil }
            return port
        }

        /// The first Data component, the common single-payload case. Any thread; O(components).
        public var data: Data? { components.lazy.compactMap { if case .data(let d) = $0 { d } else { nil } }.first }

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

extension MessagePort.Message.Component: FrameComponent {
    var frameDataLength: Int? {
        if case .data(let data) = self { data.count } else { nil }
    }

    func copyFrameData(into destination: UnsafeMutableRawBufferPointer) {
        if case .data(let data) = self { data.withUnsafeBytes { destination.copyMemory(from: $0) } }
    }
}

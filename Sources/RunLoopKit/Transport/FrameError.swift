/// Why a received frame was rejected (Protocols/port-message-frame.md §5). The receiver drops
/// the connection the frame came on and closes every descriptor that came with it.
public enum FrameError: String, Error, Equatable, Sendable, CaseIterable {
    /// Fewer than the 16 header bytes.
    case truncatedHeader
    /// The first four bytes are not "RLKM".
    case badMagic
    /// A version this implementation does not speak.
    case unsupportedVersion
    /// A flag bit that version 1 reserves is set.
    case reservedFlags
    /// More components than the protocol allows.
    case tooManyComponents
    /// A component kind other than DATA (1), PORT (2) or MEMORY (3).
    case badComponentKind
    /// A reserved byte of a component entry is not zero.
    case reservedBytes
    /// A PORT component declares a non-zero length.
    case portLength
    /// The header, the component table and the frame's byte count disagree.
    case lengthMismatch
    /// The frame exceeds the maximum frame size.
    case frameTooLarge
    /// The number of descriptors differs from the PORT components (+1 with a reply port).
    case descriptorCountMismatch
    /// The kernel truncated the frame (MSG_TRUNC).
    case truncated
    /// The kernel truncated the descriptors (MSG_CTRUNC) because the frame carried more than
    /// the receiver has room for. (Descriptors the receiving process had no number left for are
    /// its own exhaustion, `PortError.resourceExhausted`, and cost the sender nothing.)
    case descriptorsTruncated
    /// A descriptor is not an AF_UNIX SOCK_SEQPACKET socket, so it cannot be a port's send right.
    case descriptorNotAPort
    /// Ancillary data other than one SCM_RIGHTS array.
    case unexpectedControlMessage
    /// A MEMORY component declares length 0.
    case memoryLength
    /// A MEMORY component's descriptor is not a memfd (a pipe, a regular file, a socket…).
    case descriptorNotMemory
    /// A MEMORY component's memfd lacks `F_SEAL_WRITE`, `F_SEAL_SHRINK` or `F_SEAL_GROW`, so its
    /// sender could still change or truncate it under the receiver (`F_SEAL_FUTURE_WRITE`
    /// does not count: it leaves a writable mapping made before it).
    case memoryNotSealed
    /// A MEMORY component's memfd is smaller than the length the frame declares.
    case memoryTooSmall
    /// The METADATA section (a sender's trace context) is malformed: a field count outside
    /// 1…16, a key or value too long or not UTF-8, or bytes left over after the last field.
    case badMetadata
}

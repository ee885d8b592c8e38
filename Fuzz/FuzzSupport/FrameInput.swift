/// The input of the frame fuzz targets: two bytes of receive conditions, then the record.
///
///     0  1  descriptors D attached to the record (byte % 72: up to 71, past the 65 a frame may
///           carry, so the receiver's extra-descriptor path is reached too); byte / 72, bit 0:
///           the record is sent twice more on the same connection, without explicit credentials
///           (a connection's later frames, pinned through its first ones); bit 1: the port
///           refuses port components (`acceptsPortComponents == false`)
///     1  1  options: bits 0–2 choose the kinds of descriptor (0: all genuine send rights, else
///           a rotation through every kind in `HostileDescriptors`); bit 3 sends an explicit
///           SCM_CREDENTIALS; bits 4–7 are the claimed uid and gid (as root)
///     2  …  the record's bytes
///
/// `Fuzz/make-corpus.py` writes each frame vector of Protocols/vectors/ in this form.
public struct FrameInput {
    public static let mostDescriptors = 71

    public let descriptorCount: Int
    public let repeated: Bool
    public let refusesPorts: Bool
    public let descriptorKinds: Int
    public let explicitCredentials: Bool
    public let claimedID: UInt32
    public let record: UnsafeRawBufferPointer

    /// Nil for inputs shorter than the two prefix bytes.
    public init?(_ bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= 2 else { return nil }
        descriptorCount = Int(bytes[0]) % (Self.mostDescriptors + 1)
        let extra = Int(bytes[0]) / (Self.mostDescriptors + 1)
        repeated = extra & 1 != 0
        refusesPorts = extra & 2 != 0
        descriptorKinds = Int(bytes[1] & 0x07)
        explicitCredentials = bytes[1] & 0x08 != 0
        claimedID = UInt32(bytes[1] >> 4)
        record = UnsafeRawBufferPointer(rebasing: bytes[2...])
    }
}

#if canImport(Glibc)
import Glibc
#endif

/// Descriptor refusal (Linux 6.16+): a socket with SO_PASSRIGHTS off accepts no SCM_RIGHTS, so a
/// peer cannot make the receiving process hold descriptors it does not want.
extension SeqPacketSocket {
    static let passRightsOption: Int32 = 83

    /// SO_PASSRIGHTS on (the default) or off. Off, the kernel refuses a record with descriptors
    /// at the sender's sendmsg(2), which fails with EPERM; records queued before the call still
    /// carry theirs. Throws ENOPROTOOPT before Linux 6.16.
    func setAcceptsDescriptors(_ on: Bool) throws(Errno) {
        if let fault = KernelFault.injected(into: .passRights) { throw fault }
        var value: Int32 = on ? 1 : 0
        _ = try syscallRetryingEINTR {
            setsockopt(descriptor.rawValue, SOL_SOCKET, Self.passRightsOption, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }
}

#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A listening AF_UNIX SOCK_SEQPACKET socket in the abstract namespace: the kernel frees the
/// address the moment the last descriptor of the socket closes (the owner died or closed it),
/// so no file is ever left behind. Accepted sockets are non-blocking, close-on-exec and carry
/// SO_PASSCRED, so every record read from them comes with the sender's credentials.
struct UnixListener: Sendable, Hashable {
    let descriptor: FileDescriptor

    /// The most connections the kernel queues before `accept` (SOMAXCONN caps it further).
    static let backlog: Int32 = 128

    /// Binds and listens at the abstract address `name` (the bytes after sun_path's leading
    /// NUL). Throws EADDRINUSE when a live socket holds it.
    static func listen(abstractName name: [UInt8]) throws(Errno) -> UnixListener {
        let fd = try syscallRetryingEINTR {
            socket(AF_UNIX, Int32(SOCK_SEQPACKET.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
        let listener = UnixListener(descriptor: FileDescriptor(rawValue: fd))
        do throws(Errno) {
            try listener.setPassCredentials()
            let result = withAbstractAddress(name) { address, length in bind(fd, address, length) }
            if result != 0 { throw Errno.current }
            _ = try syscallRetryingEINTR { Glibc.listen(fd, backlog) }
        } catch {
            listener.close()
            throw error
        }
        return listener
    }

    /// Adopts a listening socket made by someone else (systemd socket activation). Throws
    /// EPROTOTYPE unless it is an AF_UNIX SOCK_SEQPACKET socket in the listening state.
    init(adopting descriptor: FileDescriptor) throws(Errno) {
        func option(_ name: Int32) -> Int32? {
            var value: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            return getsockopt(descriptor.rawValue, SOL_SOCKET, name, &value, &length) == 0 ? value : nil
        }
        guard option(SO_DOMAIN) == AF_UNIX, option(SO_TYPE) == Int32(SOCK_SEQPACKET.rawValue),
              option(SO_ACCEPTCONN) == 1 else { throw Errno(rawValue: EPROTOTYPE) }
        let flags = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_GETFL) }
        _ = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_SETFL, flags | O_NONBLOCK) }
        _ = try syscallRetryingEINTR { fcntl(descriptor.rawValue, F_SETFD, FD_CLOEXEC) }
        self.descriptor = descriptor
        try setPassCredentials()
    }

    private init(descriptor: FileDescriptor) { self.descriptor = descriptor }

    private func setPassCredentials() throws(Errno) {
        var on: Int32 = 1
        _ = try syscallRetryingEINTR {
            setsockopt(descriptor.rawValue, SOL_SOCKET, SO_PASSCRED, &on, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// The abstract name the socket is bound to (nil for a path or an unbound socket).
    var abstractName: [UInt8]? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let result = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor.rawValue, $0, &length) }
        }
        return result == 0 ? RunLoopKit.abstractName(in: address, length: length) : nil
    }

    /// Accepts one waiting connection: non-blocking, close-on-exec, with SO_PASSCRED. Nil when
    /// none is waiting; throws EMFILE/ENFILE/ENOBUFS/ENOMEM when out of resources.
    func accept() throws(Errno) -> SeqPacketSocket? {
        while true {
            let fd = crlk_accept_nonblocking(descriptor.rawValue)
            if fd >= 0 {
                let socket = SeqPacketSocket(descriptor: FileDescriptor(rawValue: fd))
                socket.setPassCredentials()
                return socket
            }
            switch errno {
            case EAGAIN: return nil
            // The connecting process gave up (or was killed) before it was accepted: next one.
            case EINTR, ECONNABORTED, EPROTO: continue
            default: throw Errno.current
            }
        }
    }

    func close() { descriptor.close() }
}

/// Calls `body` with a sockaddr_un for the abstract name `name` and its exact length (abstract
/// names are length-delimited, not NUL-terminated).
func withAbstractAddress<R>(_ name: [UInt8], _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    precondition(name.count < capacity, "abstract socket name of \(name.count) bytes exceeds sun_path")
    withUnsafeMutableBytes(of: &address.sun_path) { path in
        path[0] = 0
        path.baseAddress!.advanced(by: 1).copyMemory(from: name, byteCount: name.count)
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + 1 + name.count)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
    }
}

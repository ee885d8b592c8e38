#if canImport(Glibc)
import Glibc
#endif

/// The listening TCP socket: bound here to 127.0.0.1, or passed by systemd (socket
/// activation). Non-blocking either way, so that accepting never blocks the network thread.
struct Listener {
    enum Failure: Error, CustomStringConvertible {
        case system(String, Int32)
        var description: String {
            switch self {
            case .system(let call, let code): "\(call): \(String(cString: strerror(code)))"
            }
        }
    }

    let descriptor: Int32
    /// The port it listens on (the kernel's choice for port 0).
    let port: UInt16

    /// Binds 127.0.0.1:`port` (0: any free port) and listens.
    static func bind(port: UInt16) throws(Failure) -> Listener {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw .system("socket", errno) }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw .system("bind 127.0.0.1:\(port)", code)
        }
        // Redis's default tcp-backlog.
        guard listen(fd, 511) == 0 else {
            let code = errno
            close(fd)
            throw .system("listen", code)
        }
        return Listener(descriptor: fd, port: try boundPort(fd))
    }

    /// A socket systemd bound and passed: made non-blocking (systemd passes it blocking unless
    /// the unit says `NonBlocking=yes`).
    static func adopt(_ fd: Int32) throws(Failure) -> Listener {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else { throw .system("fcntl", errno) }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return Listener(descriptor: fd, port: try boundPort(fd))
    }

    private static func boundPort(_ fd: Int32) throws(Failure) -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0 else { throw .system("getsockname", errno) }
        return UInt16(bigEndian: address.sin_port)
    }
}

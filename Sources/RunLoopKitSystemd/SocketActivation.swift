#if canImport(Glibc)
import Glibc
#endif
import CSystemd

/// The listening sockets systemd passed to this process (socket activation, `sd_listen_fds(3)`):
/// a `.socket` unit binds the service's name before the daemon starts, so clients can connect
/// (and wait in the kernel's backlog) before it runs. Hand the one for a port's name to
/// `MessagePort.publish(as:access:listeningSocket:)`:
///
///     try port.publish(as: "example-daemon", access: .anyone,
///                      listeningSocket: SocketActivation.listeningSocket(named: "example-daemon"))
///
/// with, in the unit (see Protocols/named-ports.md §7):
///
///     ListenSequentialPacket=@runloopkit/0/example-daemon
///     FileDescriptorName=example-daemon
public enum SocketActivation {
    /// The passed descriptors (from 3 on) with their `FileDescriptorName=` names, read once per
    /// process; `LISTEN_FDS`, `LISTEN_PID` and `LISTEN_FDNAMES` are then removed from the
    /// environment so that children do not inherit them. Empty when not socket-activated.
    /// Any thread; the first call costs a few fcntl(2), later ones nothing.
    public static var listeningSockets: [(name: String, descriptor: Int32)] { passed.sockets }

    /// The passed socket named `name`, else the only passed socket when exactly one was passed
    /// (whatever its name), else nil: then the port binds the name itself. Any thread.
    public static func listeningSocket(named name: String) -> Int32? {
        let sockets = passed.sockets
        if let named = sockets.first(where: { $0.name == name }) { return named.descriptor }
        return sockets.count == 1 ? sockets[0].descriptor : nil
    }

    private struct Passed: Sendable {
        let sockets: [(name: String, descriptor: Int32)]
    }

    private static let passed: Passed = {
        var names: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        let count = sd_listen_fds_with_names(1, &names)
        guard count > 0 else { return Passed(sockets: []) }
        defer {
            for index in 0..<Int(count) { free(names?[index]) }
            free(names)
        }
        let sockets = (0..<Int(count)).map { index in
            (name: names?[index].map { String(cString: $0) } ?? "", descriptor: SD_LISTEN_FDS_START + Int32(index))
        }
        return Passed(sockets: sockets)
    }()
}

#if canImport(Glibc)
import Glibc
#endif
import RunLoopKitSystemd

/// The listening sockets systemd passed (socket activation), matched to the names the daemon
/// publishes by the address each is bound to.
///
/// Not by `SocketActivation.listeningSocket(named:)`: a `.socket` unit gives one
/// `FileDescriptorName=` to every socket it binds, so the two names' sockets cannot be told apart
/// by it, and that lookup hands out the only passed socket for any name — the service's socket
/// for `NAME.actor` too, which publishing would then refuse. The address is what the names are
/// (`@runloopkit/<uid>/<name>`, Protocols/named-ports.md §3), whatever the unit calls them.
enum ActivationSockets {
    /// The passed socket bound to each of `names`; a passed socket bound to none of them is
    /// logged and closed. Empty when not socket-activated. Main thread, at start-up; a
    /// getsockname(2) per passed socket.
    static func take(names: [String]) -> [String: Int32] {
        var found: [String: Int32] = [:]
        for (fdName, descriptor) in SocketActivation.listeningSockets {
            if let name = boundName(descriptor), names.contains(name), found[name] == nil {
                found[name] = descriptor
            } else {
                log("socket activation: ignoring passed socket \(descriptor) ('\(fdName)', bound to "
                    + "\(boundName(descriptor).map { "'\($0)'" } ?? "no port name")): not one of \(names)")
                close(descriptor)
            }
        }
        return found
    }

    /// The port name in the abstract address `descriptor` is bound to (`\0runloopkit/<uid>/<name>`),
    /// or nil when it is bound to no such address.
    private static func boundName(_ descriptor: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        let pathLength = Int(length) - MemoryLayout<sa_family_t>.size
        guard rc == 0, address.sun_family == sa_family_t(AF_UNIX), pathLength > 1 else { return nil }
        let path = withUnsafeBytes(of: address.sun_path) { Array($0.prefix(pathLength)) }
        guard path[0] == 0 else { return nil }   // a path on disk, not the abstract namespace
        let parts = path.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].elementsEqual("runloopkit".utf8) else { return nil }
        return String(decoding: parts[2], as: UTF8.self)
    }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A published name as the kernel shows it: a listening abstract AF_UNIX socket at
/// `runloopkit/<uid>/<name>` (Protocols/named-ports.md §3), and the process that holds it.
/// Read from /proc without connecting, so the publisher sees nothing of it.
struct PublishedName {
    var name: String
    var scope: UInt32
    var pid: Int32?
    var uid: UInt32?
    var command: String?
    var unit: String?
    var introspection: Bool

    var json: [String: Any] {
        ["name": name, "scope": scope, "pid": pid.map { $0 as Any } ?? NSNull(),
         "uid": uid.map { $0 as Any } ?? NSNull(), "command": command ?? NSNull(), "unit": unit ?? NSNull(),
         "introspection": introspection]
    }
}

enum Names {
    static let prefix = "@runloopkit/"
    static let introspectionPrefix = "@runloopkit-introspection/"

    /// The listening SOCK_SEQPACKET abstract sockets of this network namespace: inode → address.
    static func listeningSockets() throws -> [(inode: UInt64, address: String)] {
        guard let table = readWhole("/proc/net/unix") else {
            throw Failure("cannot read /proc/net/unix")
        }
        var sockets: [(UInt64, String)] = []
        for line in table.split(separator: "\n").dropFirst() {
            // Num RefCount Protocol Flags Type St Inode Path
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 8, let flags = UInt32(fields[3], radix: 16), flags & 0x10000 != 0,
                  fields[4] == "0005", let inode = UInt64(fields[6]) else { continue }
            sockets.append((inode, fields[7...].joined(separator: " ")))
        }
        return sockets
    }

    /// Socket inode → the processes holding a descriptor of it (those whose /proc/PID/fd this
    /// process may read: its own uid's, or all as root).
    static func socketHolders() -> [UInt64: [Int32]] {
        var holders: [UInt64: [Int32]] = [:]
        let processes = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        for entry in processes {
            guard let pid = Int32(entry) else { continue }
            let directory = "/proc/\(pid)/fd"
            guard let descriptors = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for fd in descriptors {
                guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(fd)"),
                      target.hasPrefix("socket:["), let inode = UInt64(target.dropFirst(8).dropLast()) else { continue }
                if holders[inode]?.contains(pid) != true { holders[inode, default: []].append(pid) }
            }
        }
        return holders
    }

    /// The names published in `scopes` (nil: every scope), sorted by name.
    static func published(scopes: Set<UInt32>?) throws -> [PublishedName] {
        let sockets = try listeningSockets()
        let introspecting = Set(sockets.compactMap { socket -> Int32? in
            socket.address.hasPrefix(introspectionPrefix) ? Int32(socket.address.dropFirst(introspectionPrefix.count)) : nil
        })
        let holders = socketHolders()
        var names: [PublishedName] = []
        for socket in sockets where socket.address.hasPrefix(prefix) {
            let rest = socket.address.dropFirst(prefix.count)
            guard let slash = rest.firstIndex(of: "/"), let scope = UInt32(rest[..<slash]) else { continue }
            if let scopes, !scopes.contains(scope) { continue }
            // systemd holds a socket-activated listener too: the publisher is the other holder.
            let pids = holders[socket.inode] ?? []
            let pid = pids.first { $0 != 1 } ?? pids.first
            names.append(PublishedName(name: String(rest[rest.index(after: slash)...]), scope: scope, pid: pid,
                                       uid: pid.flatMap(ProcessInfoReader.uid), command: pid.flatMap(ProcessInfoReader.command),
                                       unit: pid.flatMap(ProcessInfoReader.unit),
                                       introspection: pid.map(introspecting.contains) ?? false))
        }
        return names.sorted { ($0.name, $0.scope) < ($1.name, $1.scope) }
    }

    /// The scopes a process of this uid looks in (its own, then the system's).
    static var callerScopes: Set<UInt32> { [geteuid(), 0] }

    /// The publisher of `name`, looked up as `MessagePort.connect(to:)` would: this uid's scope,
    /// then the system scope.
    /// A /proc table in as few reads as it takes, with a large buffer: the kernel builds each read
    /// afresh from its socket lists, so a table read in many small pieces while sockets come and
    /// go can miss an entry.
    static func readWhole(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1 << 22)
        while true {
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else { return nil }
            if count == 0 { break }
            bytes += chunk[..<count]
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func publisher(of name: String) throws -> Int32 {
        // A table read while many sockets come and go can still miss the entry: look twice more.
        var found = try published(scopes: callerScopes).filter { $0.name == name }
        for _ in 0..<2 where found.isEmpty {
            usleep(20_000)
            found = try published(scopes: callerScopes).filter { $0.name == name }
        }
        let ordered = found.sorted { a, _ in a.scope == geteuid() }
        guard let pid = ordered.first?.pid else {
            throw Failure(found.isEmpty ? "no port is published as '\(name)'" : "cannot see the process publishing '\(name)'")
        }
        return pid
    }
}

enum ProcessInfoReader {
    static func uid(_ pid: Int32) -> UInt32? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("Uid:") {
            // Real, effective, saved, filesystem: a publisher's scope is its effective uid.
            let fields = line.split(whereSeparator: { $0 == "\t" || $0 == " " })
            return fields.count > 2 ? UInt32(fields[2]) : nil
        }
        return nil
    }

    static func command(_ pid: Int32) -> String? {
        (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.trimmingCharacters(in: .newlines)
    }

    /// The systemd unit from the cgroup v2 path (`0::/system.slice/kv.service`): its last
    /// component that names a unit.
    static func unit(_ pid: Int32) -> String? {
        guard let cgroups = try? String(contentsOfFile: "/proc/\(pid)/cgroup", encoding: .utf8) else { return nil }
        for line in cgroups.split(separator: "\n") where line.hasPrefix("0::") {
            let components = line.dropFirst(3).split(separator: "/")
            return components.last { $0.hasSuffix(".service") || $0.hasSuffix(".scope") }.map(String.init)
        }
        return nil
    }
}

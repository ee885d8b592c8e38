import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Starts the daemon at `path` with `arguments` as systemd would, its stdout and stderr on a
/// socketpair whose other end is returned (the caller reads and closes it). The environment is
/// the test's minus the systemd variables, plus `environment`. Signals are reset to their
/// defaults and unblocked. `listeningSocket` becomes descriptor 3 with LISTEN_FDS=1,
/// LISTEN_FDNAMES=`activationName` and LISTEN_PID the daemon's pid (set by a shell that then
/// execs the daemon, keeping its pid).
package func spawnDaemon(_ path: String, _ arguments: [String], environment: [String: String],
                         listeningSocket: Int32?, activationName: String) throws -> (pid: pid_t, output: Int32) {
    try spawnDaemon(path, arguments, environment: environment,
                    listeningSockets: listeningSocket.map { [(descriptor: $0, name: activationName)] } ?? [])
}

/// `spawnDaemon(_:_:environment:listeningSocket:activationName:)` with any number of passed
/// sockets, as a `.socket` unit with several `Listen…=` lines passes them: at descriptors 3, 4, …
/// in order, LISTEN_FDS their count, LISTEN_FDNAMES their names joined by ":".
package func spawnDaemon(_ path: String, _ arguments: [String], environment: [String: String],
                         listeningSockets: [(descriptor: Int32, name: String)]) throws -> (pid: pid_t, output: Int32) {
    let pair = try closeOnExecSocketPair()
    defer { close(pair[1]) }

    var env = ProcessInfo.processInfo.environment
    for key in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"] {
        env[key] = nil
    }
    env.merge(environment) { _, new in new }
    var program = path
    var argv = [path] + arguments
    if !listeningSockets.isEmpty {
        env["LISTEN_FDS"] = "\(listeningSockets.count)"
        env["LISTEN_FDNAMES"] = listeningSockets.map(\.name).joined(separator: ":")
        program = "/bin/sh"
        argv = ["/bin/sh", "-c", "LISTEN_PID=$$ exec \"$0\" \"$@\"", path] + arguments
    }

    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    // stderr too: a daemon must not hold the test runner's own output open (if the runner
    // died, `swift test` would wait for that output to end for ever).
    posix_spawn_file_actions_adddup2(&actions, pair[1], STDOUT_FILENO)
    posix_spawn_file_actions_adddup2(&actions, pair[1], STDERR_FILENO)
    // Through spare numbers, so that dup2 never maps a descriptor onto itself (which would
    // leave it close-on-exec), nor onto a number a later socket is still to be read from.
    let spares = listeningSockets.map { fcntl($0.descriptor, F_DUPFD_CLOEXEC, 10) }
    defer { spares.filter { $0 >= 0 }.forEach { close($0) } }
    guard !spares.contains(where: { $0 < 0 }) else { throw TestFailure("fcntl F_DUPFD_CLOEXEC: errno \(errno)") }
    for (index, spare) in spares.enumerated() { posix_spawn_file_actions_adddup2(&actions, spare, 3 + Int32(index)) }
    // Nothing else of the test process's: a descriptor another test running in parallel holds
    // without close-on-exec would otherwise live on in the child (and keep, say, its peer from
    // seeing end of file). Glibc's closefrom action is not exported to Swift.
    let firstClosed: Int32 = 3 + Int32(spares.count)
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        if let fd = Int32(name), fd >= firstClosed { posix_spawn_file_actions_addclose(&actions, fd) }
    }
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for signal in [SIGTERM, SIGHUP, SIGINT, SIGUSR1, SIGUSR2, SIGPIPE] { sigaddset(&defaults, signal) }
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    var child: pid_t = 0
    let envStrings = env.map { "\($0.key)=\($0.value)" }
    let rc = withCStrings(argv) { argvPointers in
        withCStrings(envStrings) { envPointers in
            posix_spawn(&child, program, &actions, &attributes, argvPointers, envPointers)
        }
    }
    guard rc == 0 else {
        close(pair[0])
        throw TestFailure("posix_spawn \(program): \(String(cString: strerror(rc)))")
    }
    return (child, pair[0])
}

/// A connected pair of stream sockets, both ends close-on-exec from their creation, for a child
/// process's standard stream in place of Foundation's `Pipe()`, whose ends are not: a child that
/// a test running in parallel starts before `Process.run()` closes this side's copy (or, for a
/// child's stdin, before the writer closes its end) inherits that end, and the reader then waits
/// for end of file until that other child exits, and the child for its input until then. A child
/// gets its end only as the standard stream it is given (dup2 clears close-on-exec on the copy).
/// Give `childEnd` to the `Process`, then `close()` it once the child runs.
package func closeOnExecStream() throws -> (ours: FileHandle, childEnd: FileHandle) {
    let pair = try closeOnExecSocketPair()
    return (FileHandle(fileDescriptor: pair[0], closeOnDealloc: true), FileHandle(fileDescriptor: pair[1], closeOnDealloc: true))
}

/// A connected pair of blocking AF_UNIX stream sockets, both ends close-on-exec from their
/// creation: what the spawning helpers give a child as its standard streams (see
/// `closeOnExecStream` for why not a pipe). The caller closes both.
package func closeOnExecSocketPair() throws -> [Int32] {
    var pair: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
        throw TestFailure("socketpair: errno \(errno)")
    }
    return pair
}

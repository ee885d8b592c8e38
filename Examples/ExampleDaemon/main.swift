// example-daemon: a small RunLoopKit service for systemd (see example-daemon.service).
//
// The main thread's loop accepts requests (made by a timer, standing in for a socket), hands
// them to two resident worker threads through MessagePorts and collects the replies. SIGTERM
// drains and stops it; SIGHUP reloads the configuration file named by the first argument.
// Under systemd it sends READY, STATUS, RELOADING, STOPPING and WATCHDOG; without it, it
// runs the same way and prints "ready", "reloaded", "stopping", "stopped: …" on stdout.
#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit

// First, before any thread exists: block the signals the main loop reads through its
// signalfd. The worker threads inherit the mask, so the kernel keeps SIGTERM and SIGHUP
// pending for the signalfd instead of killing the process through some other thread.
do {
    try SignalSource.blockInCurrentThread([SIGTERM, SIGHUP])
    let daemon = try Daemon(configurationPath: CommandLine.arguments.dropFirst().first)
    exit(try daemon.run())
} catch {
    log("start-up failed: \(error)")
    exit(1)
}

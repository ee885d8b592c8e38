// example-daemon: a small RunLoopKit service for systemd (see example-daemon.service and
// example-daemon.socket), and example-client its client.
//
// The main thread's loop publishes the service port under a name; clients connect by name
// (MessagePort.connect(to:)) and send requests with sendRequest. Each request goes to one of
// two resident worker threads, which answer the client directly. SIGTERM unpublishes, drains
// and stops it; SIGHUP reloads the configuration file named by the first argument.
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

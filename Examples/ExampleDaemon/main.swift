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
    #if GRPC
    // [--grpc HOST:PORT [--grpc-tls CERT KEY CA]] [CONFIG]
    var arguments = Array(CommandLine.arguments.dropFirst())
    var grpc: GRPCOptions?
    if arguments.first == "--grpc" {
        guard arguments.count >= 2, let options = GRPCOptions(address: arguments[1]) else {
            log("usage: example-daemon [--grpc HOST:PORT [--grpc-tls CERT KEY CA]] [CONFIG]")
            exit(2)
        }
        grpc = options
        arguments.removeFirst(2)
        if arguments.first == "--grpc-tls", arguments.count >= 4 {
            grpc?.tls = (arguments[1], arguments[2], arguments[3])
            arguments.removeFirst(4)
        }
    }
    var alsoServe: (@Sendable (MessagePort, String) throws -> @Sendable () -> Void)?
    if let grpc {
        alsoServe = { service, name in
            let export = try GRPCExport(service, as: name, options: grpc)
            return { export.stop() }
        }
    }
    let daemon = try Daemon(configurationPath: arguments.first, alsoServe: alsoServe)
    #else
    let daemon = try Daemon(configurationPath: CommandLine.arguments.dropFirst().first)
    #endif
    exit(try daemon.run())
} catch {
    log("start-up failed: \(error)")
    exit(1)
}

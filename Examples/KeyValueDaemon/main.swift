// kv-daemon: a Redis-protocol (RESP2) key-value server built on RunLoopKit's resident threads
// and ports, to show a daemon on RunLoopKit under clients it did not write (redis-cli,
// redis-benchmark). One network thread holds the listening socket and every connection, each an
// fd source; N shard threads each own the keys that hash to them and run their commands; the
// network thread sends each shard one port message per pass of its loop with every command
// read for it, and the shard answers through the message's reply port. Expiry runs on each
// shard's timer. See the DocC article "A Key-Value Daemon" for the walk-through.
//
// Commands: PING ECHO SET GET DEL EXISTS INCR DECR INCRBY MGET MSET EXPIRE PEXPIRE TTL PTTL
// DBSIZE FLUSHALL QUIT, and COMMAND, CONFIG GET, HELLO 2, CLIENT SETNAME/GETNAME/ID; replies,
// errors included, as redis-server 7.0 gives them.
#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit

// First, before any thread exists: block the signals the main loop reads through its signalfd,
// so that the kernel keeps them pending for it instead of killing the process through another
// thread (every thread started later inherits the mask).
do {
    try SignalSource.blockInCurrentThread([SIGTERM, SIGINT])
    let configuration = try Configuration.parse(Array(CommandLine.arguments.dropFirst()))
    exit(try Daemon(configuration: configuration).run())
} catch let error as Configuration.UsageError {
    log("\(error)")
    exit(2)
} catch {
    log("start-up failed: \(error)")
    exit(1)
}

// watchdog-host: a daemon with a main loop and one worker loop, both watched by a
// WatchdogKeepAlive, for the watchdog tests (RunLoopKitSystemdTests/WatchdogTests.swift).
//
//   SIGUSR1  wedges the worker: a block on its loop that waits for SIGUSR2
//   SIGUSR2  unwedges it
//   SIGTERM  stops
//
// The main loop sends STATUS=tick every 50 ms (so a test sees it turning), and STATUS=withheld:
// <threads> each time the keep-alive withholds a WATCHDOG=1. Stdout: "ready", "wedged",
// "unwedged", "stopped".
#if canImport(Glibc)
import Glibc
#endif
import RunLoopKit
import RunLoopKitSystemd

func say(_ text: String) {
    var line = Array((text + "\n").utf8)
    _ = write(STDOUT_FILENO, &line, line.count)
}

try SignalSource.blockInCurrentThread([SIGTERM, SIGUSR1, SIGUSR2])
let notifier = SystemdNotifier()
let loop = ThreadRunLoop.main
let worker = ResidentThread(name: "worker")
var pipeEnds: [Int32] = [-1, -1]
guard pipe(&pipeEnds) == 0 else { fatalError("pipe: errno \(errno)") }
let (wedge, unwedge) = (pipeEnds[0], pipeEnds[1])

let watchdog = WatchdogKeepAlive(notifier: notifier, watching: [loop, worker.runLoop]) { stuck in
    notifier.status("withheld: " + stuck.map(\.threadName).joined(separator: ","))
}
watchdog.add(to: loop)
let ticks = RunLoopTimer(interval: .milliseconds(50), repeats: true) { _ in notifier.status("tick") }
loop.add(ticks, forMode: .default)

let signals = try SignalSource(signals: [SIGTERM, SIGUSR1, SIGUSR2]) { _, signal in
    switch signal {
    case SIGUSR1:
        try? worker.perform {
            say("wedged")
            var byte: UInt8 = 0
            while read(wedge, &byte, 1) < 0 && errno == EINTR {}
            say("unwedged")
        }
    case SIGUSR2:
        var byte: UInt8 = 1
        _ = write(unwedge, &byte, 1)
    default:
        loop.stop()
    }
}
signals.add(to: loop, forMode: .default)

notifier.ready()
say("ready")
loop.run()
watchdog.invalidate()
signals.invalidate()
ticks.invalidate()
worker.stop()
say("stopped")

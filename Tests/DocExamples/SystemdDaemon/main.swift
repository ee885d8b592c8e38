import FoundationEssentials
import Glibc
import RunLoopKit
import RunLoopKitSystemd

// First, before any thread exists: every thread then inherits the mask, so SIGTERM and SIGHUP
// wait for the signalfd instead of killing the process through some other thread.
try SignalSource.blockInCurrentThread([SIGTERM, SIGHUP])

let name = CommandLine.arguments.dropFirst().first ?? "com.example.greeter"
let notifier = SystemdNotifier()                          // every call a no-op outside systemd
let loop = ThreadRunLoop.main

// The work: a resident thread answers each request on the client's reply port.
let worker = ResidentThread(name: "greeter")
let service = try MessagePort()
service.setHandler { request in                           // on the "greeter" thread
    let who = String(decoding: request.data ?? Data(), as: UTF8.self)
    // Queued at once or dropped, never waited for: a client that does not read its replies
    // must not hold up the thread that serves everyone else (its request times out).
    try? request.replyPort?.send(msgid: request.msgid, components: [.data(Data("hello, \(who)".utf8))],
                                 before: .now)
}
worker.runLoop.add(service, forMode: .default)

// SIGHUP reloads, SIGTERM stops: both read on the main loop's thread, like any other event.
let signals = try SignalSource(signals: [SIGTERM, SIGHUP]) { _, signal in
    if signal == SIGHUP {
        notifier.reloading(status: "Reloading")
        notifier.ready(status: "Serving \(name)")
    } else {
        service.unpublish()                               // new clients find no name
        notifier.stopping(status: "Stopping")
        loop.stop()
    }
}
signals.add(to: loop, forMode: .default)

// WatchdogSec= in the unit: pings from the main loop, so a wedged loop gets the service restarted.
let watchdog = WatchdogKeepAlive()
watchdog.add(to: loop)

// Under socket activation systemd bound the name already; otherwise publish binds it now.
try service.publish(as: name, access: .sameUser, listeningSocket: SocketActivation.listeningSocket(named: name))
notifier.ready(status: "Serving \(name)")
print("ready")
loop.run()                                                // until SIGTERM

worker.stop()                                             // joins: requests it took are answered
service.invalidate()
print("stopped")

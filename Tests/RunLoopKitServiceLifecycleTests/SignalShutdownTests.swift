#if ServiceLifecycle
// A daemon run as `ThreadRunLoop.main.run(serviceGroup)` shuts down on SIGTERM the
// service-lifecycle way: the group's signal handling starts graceful shutdown, each
// ResidentThreadService lets its port deliver what was in flight, stops its thread, and the
// process exits 0. ServiceHost is that daemon; the test signals it once it says "ready".

import Glibc
import Testing

@Suite("ServiceGroup on the main loop: SIGTERM", .serialized)
struct SignalShutdownTests {
    @Test("SIGTERM: two ResidentThreadServices deliver every in-flight message, stop their threads, and the process exits 0")
    func sigtermDrainsInFlightMessages() throws {
        let host = try #require(HostProcess(["drain"]), "could not start \(serviceHost)")
        #expect(host.waitForLine("ready"), "ServiceHost never got ready:\n\(host.transcript)")
        host.send(SIGTERM)
        let termination = host.finish()

        #expect(termination == .exited(0), "\(termination):\n\(host.transcript)")
        // The messages were queued behind busy threads when the signal arrived…
        #expect(host.value("queued before shutdown") == "2000")
        #expect(host.value("main actor on main thread") == "true")
        #expect(host.lines.contains("graceful shutdown began"))
        // …and every one was delivered before the threads stopped.
        for name in ["first", "second"] {
            #expect(host.value("\(name) sent") == "1000", "\(host.transcript)")
            #expect(host.value("\(name) delivered") == "1000", "\(host.transcript)")
            #expect(host.value("\(name) discarded") == "0")
            #expect(host.value("\(name) thread finished") == "true")
            #expect(host.value("\(name) port valid") == "false")
        }
        #expect(host.lines.last == "exit: clean")
    }

    @Test("SIGTERM: a port that cannot drain holds shutdown only until the drain timeout; its messages are discarded and the process exits 0")
    func sigtermDrainEndsAtTheTimeout() throws {
        let host = try #require(HostProcess(["timeout"]), "could not start \(serviceHost)")
        #expect(host.waitForLine("ready"), "ServiceHost never got ready:\n\(host.transcript)")
        host.send(SIGTERM)
        let termination = host.finish()

        #expect(termination == .exited(0), "\(termination):\n\(host.transcript)")
        #expect(host.value("stuck sent") == "5")
        #expect(host.value("stuck delivered") == "0")
        #expect(host.value("stuck discarded") == "5")
        #expect(host.value("stuck thread finished") == "true")
        #expect(host.lines.last == "exit: clean")
    }
}

@Suite("ServiceLifecycle adapter: programmer mistakes", .serialized)
struct ServiceLifecycleMisuseTests {
    @Test("misuse is a precondition failure naming the mistake",
          arguments: [
              ("wrong-thread", "called on a thread that does not own the loop"),
              ("run-twice", "ResidentThreadService(\"svc-twice\").run() was called a second time"),
          ])
    func misuseIsAPreconditionFailure(scenario: String, message: String) throws {
        let host = try #require(HostProcess([scenario]), "could not start \(serviceHost)")
        let termination = host.finish()
        #expect(termination == .signalled(SIGILL) || termination == .signalled(SIGTRAP), "\(termination):\n\(host.transcript)")
        #expect(host.transcript.contains(message), "\(host.transcript)")
    }
}
#endif

// TracingPortPeer: the other process of RunLoopKitTracingTests. It bootstraps the same test
// instrument as the tests (one context key, carried as "test-trace-id") and uses RunLoopKit's
// public API and PortTracing only.
//
// Modes (descriptor 3 is a send right to a port of the test process):
//   echo        installs PortTracing; owns a port P and sends [port P] to descriptor 3 as msgid 0;
//               answers each message on P with a reply port: msgid + 1, DATA the trace id its
//               handler runs within ("none" without one); msgid 99 ends it.
//   no-install  does not install PortTracing; sends msgid 1 within a context to descriptor 3.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit
import RunLoopKitTracing
import Tracing

enum TestTraceIDKey: ServiceContextKey {
    typealias Value = String
}

/// Injects and extracts one key: what a W3C instrument does with traceparent.
struct TestInstrument: Instrument {
    func extract<Carrier, Extract>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract: Extractor, Extract.Carrier == Carrier {
        if let id = extractor.extract(key: "test-trace-id", from: carrier) { context[TestTraceIDKey.self] = id }
    }

    func inject<Carrier, Inject>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject: Injector, Inject.Carrier == Carrier {
        if let id = context[TestTraceIDKey.self] { injector.inject(id, forKey: "test-trace-id", into: &carrier) }
    }
}

func fail(_ line: String) -> Never {
    var bytes = Array(("TracingPortPeer: " + line + "\n").utf8)
    _ = write(STDERR_FILENO, &bytes, bytes.count)
    exit(1)
}

InstrumentationSystem.bootstrap(TestInstrument())
let arguments = CommandLine.arguments
guard arguments.count == 2 else { fail("usage: TracingPortPeer echo|no-install") }
do {
    let parent = try MessagePort(sendRight: 3)
    switch arguments[1] {
    case "echo":
        PortTracing.install()
        let port = try MessagePort()
        port.setHandler { message in
            if message.msgid == 99 { return ThreadRunLoop.current.stop() }
            let id = ServiceContext.current?[TestTraceIDKey.self] ?? "none"
            do {
                try message.replyPort?.send(msgid: message.msgid + 1, components: [.data(Data(id.utf8))],
                                            timeout: .seconds(30))
            } catch {
                fail("reply: \(error)")
            }
        }
        ThreadRunLoop.current.add(port, forMode: .default)
        try parent.send(msgid: 0, components: [.port(port)], timeout: .seconds(30))
        ThreadRunLoop.current.run()
    case "no-install":
        var context = ServiceContext.topLevel
        context[TestTraceIDKey.self] = "not-installed"
        try ServiceContext.withValue(context) {
            try parent.send(msgid: 1, components: [.data(Data("x".utf8))], timeout: .seconds(30))
        }
    default:
        fail("unknown mode \(arguments[1])")
    }
} catch {
    fail("\(error)")
}

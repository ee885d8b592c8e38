#if Tracing
import RunLoopKit
import RunLoopKitTracing
import Synchronization
import Tracing
#endif

/// The tracing rows (fourth-round bars, Tracing trait): RunLoopKit's ping-pong and stream with
/// `PortTracing` installed and no context current at the send, and the ping-pong with every
/// message sent within a trace context — each measured in alternation, in one process, with
/// plain RunLoopKit, which runs with the instrument taken out (`MessageContext.withoutPropagator`).
/// The instrument is a no-op tracer's: it records nothing and propagates a W3C `traceparent`.
enum TracingPeer {
    /// The tracing rows of `workload` this build runs: none without the Tracing trait.
    static func rows(for workload: Workload) -> [Peer] {
        #if Tracing
        switch workload {
        case .pingpong: [.runLoopKitTracing, .runLoopKitTraceContext]
        case .throughput: [.runLoopKitTracing]
        default: []
        }
        #else
        []
        #endif
    }

    #if Tracing
    static func pingPong(_ plan: LatencyPlan, withinContext: Bool) -> LatencyMeasurement {
        installOnce()
        guard withinContext else { return RunLoopKitPeer.pingPong(plan) }
        var context = ServiceContext.topLevel
        context[TraceparentKey.self] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        let trace = context
        return RunLoopKitPeer.pingPong(plan) { sendFirstPing in
            ServiceContext.withValue(trace) { sendFirstPing() }
        }
    }

    static func throughput(_ plan: StreamPlan) -> StreamMeasurement {
        installOnce()
        return RunLoopKitPeer.throughput(plan)
    }

    private static let installed = Mutex(false)

    /// Bootstraps the instrument and installs `PortTracing`, once per process (both are).
    private static func installOnce() {
        installed.withLock { installed in
            guard !installed else { return }
            InstrumentationSystem.bootstrap(TraceparentInstrument())
            PortTracing.install()
            installed = true
        }
    }
    #endif
}

#if Tracing
/// A W3C trace parent, as a tracer keeps it in a context.
private enum TraceparentKey: ServiceContextKey {
    typealias Value = String
}

/// A no-op tracer's propagation: it records nothing, and carries the `traceparent` of a
/// context (a real tracer injects the same 55 bytes).
private struct TraceparentInstrument: Instrument {
    func inject<Carrier, Inject: Injector>(_ context: ServiceContext, into carrier: inout Carrier, using injector: Inject)
    where Inject.Carrier == Carrier {
        guard let traceparent = context[TraceparentKey.self] else { return }
        injector.inject(traceparent, forKey: "traceparent", into: &carrier)
    }

    func extract<Carrier, Extract: Extractor>(_ carrier: Carrier, into context: inout ServiceContext, using extractor: Extract)
    where Extract.Carrier == Carrier {
        guard let traceparent = extractor.extract(key: "traceparent", from: carrier) else { return }
        context[TraceparentKey.self] = traceparent
    }
}
#endif

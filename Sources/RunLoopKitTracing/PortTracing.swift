#if Tracing
import RunLoopKit
import Tracing

/// Trace context across ports: a message carries the `ServiceContext` it was sent within, and
/// its handler runs within it — in this process, in another process, and through a send right
/// handed on.
///
/// ```swift
/// InstrumentationSystem.bootstrap(tracer)   // swift-otel, or any instrument
/// PortTracing.install()
///
/// try await tracer.withSpan("checkout") { _ in
///     try worker.send(msgid: 1, components: [.data(order)], timeout: .seconds(1))
/// }
/// // On the worker's loop thread, the handler runs within the span's context.
/// ```
///
/// At each send within a context, the bootstrapped instrument injects it (a W3C `traceparent`,
/// `tracestate`, `baggage`) into the message's metadata, which a frame carries after its body
/// (`Protocols/port-message-frame.md` §3.5). Around each handler, delegate and batch-handler
/// callout the loop extracts it and runs the callout within the result. A reply is sent within
/// the handler's context, so the reply's handler runs within the request's.
public enum PortTracing {
    /// Makes every `MessagePort` send carry the sender's `ServiceContext` and every handler,
    /// delegate and batch handler run within the context of its message (a batch handler within
    /// that of the batch's first message; ``withContext(of:_:)`` gives each message its own).
    ///
    /// Call it once, after `InstrumentationSystem.bootstrap(_:)`; later calls do nothing. Any
    /// thread. Afterwards a send with no current context adds nothing to its message; one within
    /// a context costs the instrument's `inject` and the fields' bytes, and each delivery an
    /// `extract` and a task-local binding.
    public static func install() {
        MessageContext.install(ServiceContextPropagator())
    }

    /// The context `message` was sent within, as the bootstrapped instrument extracts it from
    /// the message's metadata; nil when it carries none (sent with no context, or before
    /// ``install()``). Any thread; an `extract`.
    public static func context(of message: MessagePort.Message) -> ServiceContext? {
        ServiceContextPropagator.context(of: message.metadata)
    }

    /// Runs `operation` within the context `message` was sent within (none when it carries
    /// none): for each message a batch handler takes or a `messages()` sequence yields. Any
    /// thread; an `extract` and a task-local binding.
    public static func withContext<Result>(of message: MessagePort.Message,
                                           _ operation: () throws -> Result) rethrows -> Result {
        try ServiceContext.withValue(context(of: message), operation: operation)
    }

    /// The async form of ``withContext(of:_:)``, for the body of a `for await` over `messages()`.
    public static func withContext<Result>(of message: MessagePort.Message,
                                           isolation: isolated (any Actor)? = #isolation,
                                           _ operation: () async throws -> Result) async rethrows -> Result {
        try await ServiceContext.withValue(context(of: message), isolation: isolation, operation: operation)
    }
}

/// The propagator `PortTracing.install()` installs: the bootstrapped instrument's inject and
/// extract over a message's metadata.
final class ServiceContextPropagator: MessageContextPropagator {
    func metadataForSend() -> MessageMetadata? {
        guard let context = ServiceContext.current else { return nil }
        var metadata = MessageMetadata()
        InstrumentationSystem.instrument.inject(context, into: &metadata, using: MetadataInjector())
        return metadata.fields.isEmpty ? nil : metadata
    }

    func withContext<Result>(of metadata: MessageMetadata?, _ body: () throws -> Result) rethrows -> Result {
        guard let metadata else {
            // A message without a context is handled with none, also in a run nested in a
            // handler that has one; with none current, no task-local binding (nor its allocation).
            if ServiceContext.current == nil { return try body() }
            return try ServiceContext.withValue(nil, operation: body)
        }
        return try ServiceContext.withValue(Self.context(of: metadata), operation: body)
    }

    func withSpan<Result>(named name: String, isClient: Bool, _ body: () async throws -> Result) async rethrows -> Result {
        try await Tracing.withSpan(name, ofKind: isClient ? .client : .server) { _ in try await body() }
    }

    static func context(of metadata: MessageMetadata?) -> ServiceContext? {
        guard let metadata else { return nil }
        var context = ServiceContext.topLevel
        InstrumentationSystem.instrument.extract(metadata, into: &context, using: MetadataExtractor())
        return context
    }
}

struct MetadataInjector: Injector {
    func inject(_ value: String, forKey key: String, into carrier: inout MessageMetadata) {
        carrier.set(value, for: key)
    }
}

struct MetadataExtractor: Extractor {
    func extract(key: String, from carrier: MessageMetadata) -> String? {
        carrier[key]
    }
}
#endif

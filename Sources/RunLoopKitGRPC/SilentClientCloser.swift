#if GRPC
import NIOCore

/// The server half of keepalive that gRPC's transport leaves out: a bridge connection from
/// which nothing has been read for `interval + timeout` is closed, ending its streams.
///
/// gRPC's server answers a ping left unacknowledged with a graceful shutdown (GOAWAY, then a
/// second ping to learn which streams the client saw), which a silent client never
/// acknowledges either: its streams, and the connection's descriptor, would stay open for ever.
/// A live client acknowledges the server's pings, which come after `interval` of quiet, within
/// `timeout`, so it is never read-idle that long. Installed first in each accepted connection's
/// pipeline, it sees every read, TLS records included.
final class SilentClientCloser: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    /// Event-loop thread: closes the connection once `IdleStateHandler` reports no read.
    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    /// The accepted-connection callback of a server with `keepalive`: adds the idle timer and
    /// this handler at the front of the connection's pipeline, on its event loop.
    static func install(_ keepalive: BridgeKeepalive) -> @Sendable (any Channel) -> EventLoopFuture<Void> {
        let limit = TimeAmount(keepalive.interval + keepalive.timeout)
        return { channel in
            channel.eventLoop.submit {
                try channel.pipeline.syncOperations.addHandlers(
                    [IdleStateHandler(readTimeout: limit), SilentClientCloser()], position: .first)
            }
        }
    }
}
#endif

#if GRPC
import GRPCNIOTransportHTTP2

/// How a bridge notices a peer that went silent — a network partition, a stopped or hung
/// process — when no TCP error will ever come: HTTP/2 PING frames (gRFC A8), sent by each side
/// on its connections. A side whose ping goes unacknowledged for `timeout` closes the
/// connection — a client's: its streams end with `unavailable`, so its proxies are
/// invalidated (blocked senders and pending requests get `.invalidPort`); a server's begins
/// gRPC's graceful shutdown of the connection (GOAWAY: no new streams on it), and a server
/// closes a connection that has sent nothing at all for `interval` + `timeout`, ending its
/// streams. A silent server or client is noticed within `interval` + `timeout`: 1.5 s with
/// `default`.
///
/// Off unless asked for (`PortBridgeClient` and `PortBridgeServer` take nil by default, gRPC's
/// own settings): the `timeout` is the margin for a peer that is alive but slow to answer — its
/// event loop busy, its host loaded, the link slow — and one that short is also exceeded by live
/// peers on loaded hosts. In this package's own test run (a debug build of every suite at once
/// on two cores) acknowledgements usually took up to 350 ms, a 500 ms timeout closed live
/// connections now and then, and once one took longer than 1.5 s. Turn it on, on both sides,
/// with margins fitted to the hosts and network it runs on; a server must also accept its
/// clients' ping rate (`minimumClientInterval`).
///
/// The cost is one 17-byte PING and its acknowledgement each way per `interval` on every
/// connection with open streams, written and answered by the transport's event-loop thread;
/// no thread of yours is involved.
public struct BridgeKeepalive: Sendable, Hashable, CustomStringConvertible {
    /// A client pings this long after its last ping was acknowledged (or its connection became
    /// ready), and again every `interval` while it is unacknowledged; a server pings a
    /// connection that has been quiet this long. Default 800 ms.
    public var interval: Duration
    /// How long the peer has to acknowledge a ping before the connection is closed; less than
    /// `interval`, because the transport restarts this wait at each ping it sends (a timeout
    /// as long as the interval would never expire). Default 700 ms.
    public var timeout: Duration
    /// Server side only: the shortest gap between a client's pings that the server accepts.
    /// Pings closer together are strikes, and the third closes the connection (GOAWAY
    /// `too_many_pings`), so keep it below the clients' `interval`. Default 100 ms, well below
    /// the default `interval` whatever the network's jitter.
    public var minimumClientInterval: Duration

    /// A keepalive configuration; see the properties for the defaults. `timeout` less than
    /// `interval` (else a precondition failure: the peer's silence would never be noticed).
    /// Any thread; free.
    public init(interval: Duration = .milliseconds(800), timeout: Duration = .milliseconds(700),
                minimumClientInterval: Duration = .milliseconds(100)) {
        precondition(timeout > .zero && timeout < interval && minimumClientInterval >= .zero, """
            BridgeKeepalive needs 0 < timeout < interval (got interval \(interval), timeout \(timeout)): \
            the transport restarts the timeout at each ping, so one as long as the interval never expires
            """)
        self.interval = interval
        self.timeout = timeout
        self.minimumClientInterval = minimumClientInterval
    }

    /// Pings every 800 ms, each acknowledged within 700 ms, so a silent peer is noticed within
    /// 1.5 s; a server accepts client pings 100 ms apart. For quiet hosts on a local network.
    /// Any thread; free.
    public static var `default`: BridgeKeepalive { BridgeKeepalive() }

    /// One line with the three durations. Any thread.
    public var description: String {
        "BridgeKeepalive(interval: \(interval), timeout: \(timeout), minimumClientInterval: \(minimumClientInterval))"
    }

    /// The client transport's keepalive: pings only while streams are open (a client without
    /// proxies has nothing to lose).
    var client: HTTP2ClientTransport.Config.Keepalive {
        HTTP2ClientTransport.Config.Keepalive(time: interval, timeout: timeout, allowWithoutCalls: false)
    }

    /// The server transport's keepalive and its tolerance of the clients' pings (allowed
    /// without calls too: a client's ping already on its way as its last stream ends is no
    /// misbehaviour).
    var server: HTTP2ServerTransport.Config.Keepalive {
        HTTP2ServerTransport.Config.Keepalive(
            time: interval, timeout: timeout,
            clientBehavior: .init(minPingIntervalWithoutCalls: minimumClientInterval, allowWithoutCalls: true))
    }
}
#endif

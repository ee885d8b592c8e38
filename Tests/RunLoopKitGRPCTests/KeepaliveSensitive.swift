#if GRPC
import Testing

/// The bridge tests that must not run beside each other: the keepalive tests need each HTTP/2
/// ping answered within a second or two, and the hostile client's flood of streams keeps the
/// process's shared event loops busy for seconds (in one CI run a client's ping went
/// unanswered for more than 1.5 s while the flood ran beside it). Their suites nest here and
/// run one after another; the rest of the suite still runs beside them.
@Suite(.serialized)
enum KeepaliveSensitive {}
#endif

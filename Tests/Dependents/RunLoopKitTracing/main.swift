// A one-file user of RunLoopKitTracing: messages carry the sender's ServiceContext.
import RunLoopKit
import RunLoopKitTracing
import Tracing

PortTracing.install()
let port = try MessagePort()
try ServiceContext.withValue(.topLevel) { try port.send(msgid: 1, timeout: .seconds(1)) }
port.invalidate()
print("messages traced by \(PortTracing.self)")

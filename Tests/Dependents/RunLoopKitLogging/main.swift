// A one-file user of RunLoopKitLogging: a loop's slow callouts as swift-log records.
import Logging
import RunLoopKit
import RunLoopKitLogging

let health = LoopHealthLogger(logger: Logger(label: "dependent"))
health.reportSlowCallouts(of: ThreadRunLoop.current, threshold: .milliseconds(100))
print("loop health logged by \(type(of: health))")

// A one-file user of RunLoopKit: a block performed on the main thread's run loop.
import RunLoopKit

let loop = ThreadRunLoop.current
loop.perform { print("performed on the main run loop") }
let result = loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: true)
print("run result: \(result)")

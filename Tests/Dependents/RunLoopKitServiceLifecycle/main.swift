// A one-file user of RunLoopKitServiceLifecycle: a resident thread as a service.
import RunLoopKit
import RunLoopKitServiceLifecycle

let thread = ResidentThread(name: "service")
print("service: \(ResidentThreadService(thread: thread))")
thread.stop()

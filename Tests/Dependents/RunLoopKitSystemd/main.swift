// A one-file user of RunLoopKitSystemd: readiness goes nowhere without NOTIFY_SOCKET.
import RunLoopKitSystemd

print("notifier enabled: \(SystemdNotifier().isEnabled)")

// A one-file user of RunLoopKitGRPC: the bridge's access policy type is all it needs to link.
import RunLoopKitGRPC

print("remote access: \(RemoteAccess.self)")

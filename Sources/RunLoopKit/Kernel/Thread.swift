#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A kernel thread identity (gettid(2)): cheap to compare, printable, and the key the
/// run loop uses to check that it is run on its own thread.
struct ThreadID: Hashable, Sendable, CustomStringConvertible {
    let rawValue: pid_t

    static var current: ThreadID { ThreadID(rawValue: crlk_gettid()) }
    /// The process's main thread: the one whose tid equals the pid.
    static var main: ThreadID { ThreadID(rawValue: getpid()) }

    var isMain: Bool { rawValue == getpid() }
    var description: String { "thread \(rawValue)" }

    /// The kernel's name for this thread of the process (`/proc/self/task/<tid>/comm`: what
    /// pthread_setname_np set, else the program's name), or nil once the thread has exited.
    /// Any thread; an open, a read and a close.
    var kernelName: String? {
        FileDescriptor.firstLine(ofFile: "/proc/self/task/\(rawValue)/comm", capacity: 32)
    }
}

/// A joinable pthread running a Swift closure.
struct KernelThread: @unchecked Sendable {
    private let handle: pthread_t

    /// Starts a thread named `name` (truncated to the kernel's 15 bytes) running `body`.
    init(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
        final class Box { let body: () -> Void; let name: String; init(_ b: @escaping () -> Void, _ n: String) { body = b; name = n } }
        let context = Unmanaged.passRetained(Box(body, name)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            KernelThread.setCurrentName(box.name)
            box.body()
            return nil
        }, context)
        guard rc == 0 else {
            Unmanaged<Box>.fromOpaque(context).release()
            throw Errno(rawValue: rc)
        }
        handle = thread
    }

    /// Names the calling thread (visible in /proc/self/task/*/comm).
    static func setCurrentName(_ name: String) {
        var bytes = Array(name.utf8.prefix(15))
        bytes.append(0)
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { _ = crlk_set_current_thread_name($0.baseAddress!) }
        }
    }

    func join() { pthread_join(handle, nil) }
    func detach() { pthread_detach(handle) }
}

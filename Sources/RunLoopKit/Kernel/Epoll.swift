#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// One readiness event reported by `Epoll.wait`.
struct EpollEvent: Sendable {
    var token: UInt64
    var readable: Bool
    var writable: Bool
    /// Error or hang-up; reported to fd sources as both readable and writable, as poll(2) does.
    var failed: Bool
    /// The peer closed its end (EPOLLHUP or EPOLLRDHUP) or the descriptor failed.
    var hungUp: Bool
}

/// An epoll instance. Registration calls may come from any thread (the kernel serialises
/// them); `wait` is called only by the owning run loop's thread, which owns the buffer.
final class Epoll: @unchecked Sendable {
    let descriptor: FileDescriptor
    private let buffer: UnsafeMutablePointer<epoll_event>
    let capacity: Int

    struct Interest: OptionSet, Sendable {
        let rawValue: UInt32
        static let readable = Interest(rawValue: EPOLLIN.rawValue)
        static let writable = Interest(rawValue: EPOLLOUT.rawValue)
        static let edgeTriggered = Interest(rawValue: EPOLLET.rawValue)
        /// Report the peer shutting down its writing side (EPOLLRDHUP).
        static let peerHangUp = Interest(rawValue: EPOLLRDHUP.rawValue)
    }

    init(capacity: Int = 64) throws(Errno) {
        let fd = try syscallRetryingEINTR { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        descriptor = FileDescriptor(rawValue: fd)
        self.capacity = capacity
        buffer = .allocate(capacity: capacity)
    }

    deinit {
        descriptor.close()
        buffer.deallocate()
    }

    func add(_ fd: FileDescriptor, interest: Interest, token: UInt64) throws(Errno) {
        try control(EPOLL_CTL_ADD, fd, interest, token)
    }

    func modify(_ fd: FileDescriptor, interest: Interest, token: UInt64) throws(Errno) {
        try control(EPOLL_CTL_MOD, fd, interest, token)
    }

    /// Removes `fd`; a descriptor that is not registered (ENOENT) or already closed (EBADF)
    /// is ignored, because removal is idempotent by design.
    func remove(_ fd: FileDescriptor) {
        var event = epoll_event()
        _ = try? syscallRetryingEINTR { epoll_ctl(descriptor.rawValue, EPOLL_CTL_DEL, fd.rawValue, &event) }
    }

    private func control(_ op: Int32, _ fd: FileDescriptor, _ interest: Interest, _ token: UInt64) throws(Errno) {
        var event = epoll_event()
        event.events = interest.rawValue
        event.data.u64 = token
        _ = try syscallRetryingEINTR { epoll_ctl(descriptor.rawValue, op, fd.rawValue, &event) }
    }

    /// Waits up to `timeoutNanoseconds` (nil: forever, zero: poll); returns how many events are
    /// ready, to be read with `event(at:)` until the next wait. EINTR returns zero events: the
    /// caller re-checks its state and waits again. One thread at a time.
    func wait(timeoutNanoseconds: Int64?) throws(Errno) -> Int {
        let n = crlk_epoll_wait_ns(descriptor.rawValue, buffer, Int32(capacity), timeoutNanoseconds.map { max(0, $0) } ?? -1)
        if n < 0 {
            let error = Errno.current
            if error == .interrupted { return 0 }
            throw error
        }
        return Int(n)
    }

    /// The `index`th event of the last `wait`.
    func event(at index: Int) -> EpollEvent {
        let raw = buffer + index
        let events = crlk_epoll_event_events(raw)
        return EpollEvent(
            token: crlk_epoll_event_data(raw),
            readable: events & EPOLLIN.rawValue != 0,
            writable: events & EPOLLOUT.rawValue != 0,
            failed: events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0,
            hungUp: events & (EPOLLERR.rawValue | EPOLLHUP.rawValue | EPOLLRDHUP.rawValue) != 0)
    }
}

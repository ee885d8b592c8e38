#if canImport(Glibc)
import Glibc
#endif
import CFuzzSupport
import RunLoopKit

/// Descriptors of every kind a hostile peer could attach to a record, made once per process:
/// a genuine send right (to a port of this process, so the proxies made from it are real), and
/// things that are not send rights — pipe ends, an eventfd, /dev/null, stream and datagram
/// sockets — plus a SOCK_SEQPACKET socket that passes the type check but leads nowhere.
/// The sender keeps them; each record carries the kernel's copies.
public final class HostileDescriptors {
    public let sendRight: Int32
    public let all: [Int32]
    /// The port the genuine send right leads to; its messages are discarded.
    public let target: MessagePort

    public init() {
        do {
            target = try MessagePort()
            target.setHandler { _ in }
            ThreadRunLoop.current.add(target, forMode: LoopDriver.mode)
            sendRight = try target.makeSendRight()
        } catch {
            fuzzFailure("cannot make the target port: \(error)")
        }
        var all = [sendRight]
        var ends: [Int32] = [-1, -1]
        guard pipe(&ends) == 0 else { fuzzFailure("pipe: \(errno)") }
        all += ends
        all.append(eventfd(0, Int32(EFD_CLOEXEC)))
        all.append(open("/dev/null", O_RDWR | O_CLOEXEC))
        for type in [SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET] {
            guard socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends) == 0 else {
                fuzzFailure("socketpair: \(errno)")
            }
            all.append(ends[0])
        }
        guard !all.contains(where: { $0 < 0 }) else { fuzzFailure("cannot make the descriptor pool") }
        self.all = all
    }

    /// `count` descriptors: all genuine send rights for `kinds` 0, else a rotation through
    /// every kind starting at `kinds`.
    public func pick(_ count: Int, kinds: Int) -> [Int32] {
        (0..<count).map { kinds == 0 ? sendRight : all[(kinds + $0) % all.count] }
    }
}

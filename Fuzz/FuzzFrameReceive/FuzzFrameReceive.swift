// libFuzzer target: receiving on a port's connection, descriptors, credentials and pidfds
// included (Protocols/port-message-frame.md §5.1–§6, the SCM_RIGHTS/SCM_CREDENTIALS/SCM_PIDFD
// path; named-ports.md §5.9–5.10).
//
// Input: `FrameInput`. Each input is sent as one record, with its descriptors (real ones, of
// every kind) and optionally an explicit SCM_CREDENTIALS, on a new send right of a port whose
// loop runs on this thread — then, when the input says so, twice more on the same connection
// without explicit credentials (a connection's later frames: the first ones bring pidfds of
// their senders, SCM_PIDFD, after which the connection pins its sender itself), and to a port
// that refuses port components when the input says so. The send right is closed after it.
// Properties checked:
// - the receiver never crashes or hangs: the connection is dropped (at end of stream or for a
//   malformed frame) and the loop returns;
// - one message per record only for a frame `PortFrame.decode` accepts, in order, with one proxy
//   per PORT component and the reply port when the frame has one, and `sender` set to the
//   process that sent it (never nil: it came through a socket), and its pinned process, where
//   there is one, that very process (as root, a claimed pid 1 pins init, never this process);
// - a port refusing port components gets no frame with descriptors: the kernel refuses it at
//   the sender (Linux 6.16+), or the owner drops it and reports `.portsRefused`;
// - a rejected frame is reported once, with a reason, and ends its connection; an accepted one
//   is not reported;
// - the process holds exactly the descriptors it held before the input (descriptors received,
//   pidfds included).

#if canImport(Glibc)
import Glibc
#endif
import CFuzzSupport
import FuzzSupport
import RunLoopKit

final class FrameReceiveTarget: Sendable {
    static let shared = FrameReceiveTarget()

    let port: MessagePort
    nonisolated(unsafe) let hostile: HostileDescriptors
    let delivered = Inbox<MessagePort.Message>()
    let reported = Inbox<PortError>()

    private init() {
        hostile = HostileDescriptors()
        do { port = try MessagePort() } catch { fuzzFailure("MessagePort(): \(error)") }
        port.setHandler { [delivered] message in delivered.append(message) }
        port.setTransportErrorHandler { [reported] error in reported.append(error) }
        ThreadRunLoop.current.add(port, forMode: LoopDriver.mode)
        LoopDriver.prepare()
    }

    func run(_ bytes: UnsafeRawBufferPointer) {
        guard let input = FrameInput(bytes) else { return }
        let before = openDescriptors()
        port.acceptsPortComponents = !input.refusesPorts
        defer { port.acceptsPortComponents = true }
        let right: Int32
        do { right = try port.makeSendRight() } catch { fuzzFailure("makeSendRight: \(error)") }
        let descriptors = hostile.pick(input.descriptorCount, kinds: input.descriptorKinds)
        // As root, a claim to be another process (pid 1) with another uid and gid, which the
        // kernel allows with CAP_SYS_ADMIN and refuses (EPERM) otherwise.
        let root = geteuid() == 0
        let claimed = Claim(pid: root ? 1 : getpid(), id: root ? input.claimedID : geteuid())
        var records: [Record] = []
        for index in 0..<(input.repeated ? 3 : 1) {
            let explicit = index == 0 && input.explicitCredentials
            // The loop reads nothing before every record is sent: the later ones do not wait
            // for room (EAGAIN: not sent).
            let sent = descriptors.withUnsafeBufferPointer { fds in
                fuzz_sendmsg(right, input.record.baseAddress, input.record.count, fds.baseAddress, Int32(fds.count),
                             explicit ? 1 : 0, claimed.pid, claimed.id, claimed.id, index == 0 ? 0 : Int32(MSG_DONTWAIT))
            }
            records.append(Record(sendError: sent < 0 ? errno : 0,
                                  sender: explicit ? MessagePort.Sender(pid: claimed.pid, uid: claimed.id, gid: claimed.id)
                                                   : MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid())))
        }
        close(right)
        LoopDriver.run(until: { [port] in port.connectionCount == 0 }, "the port to drop the connection")

        // The messages (and the proxies and pidfds they carry) are gone before the descriptors
        // are counted.
        check(input, descriptors: descriptors, records: records)
        expectNoDescriptorLeak(since: before, after: "a record of \(input.record.count) bytes with \(descriptors.count) descriptors")
    }

    private struct Claim {
        var pid: Int32
        var id: UInt32
    }

    /// One sending of the input's record: the errno of a send the kernel refused, and who sent it.
    private struct Record {
        var sendError: Int32
        var sender: MessagePort.Sender
    }

    private func check(_ input: FrameInput, descriptors: [Int32], records: [Record]) {
        var messages = delivered.take()[...]
        var errors = reported.take()[...]
        let verdict: Result<PortFrame, FrameError>
        do { verdict = .success(try PortFrame.decode(Array(input.record), descriptorCount: descriptors.count)) } catch {
            verdict = .failure(error)
        }
        let deliverable = descriptors.count <= 65 && descriptors.allSatisfy { $0 == hostile.sendRight || isSeqPacket($0) }
        for (index, record) in records.enumerated() {
            if record.sendError != 0 {
                // The kernel refused the record: a claim it does not allow (EPERM), descriptors to a
                // port that refuses them (EPERM, Linux 6.16+), or no room (EAGAIN).
                guard record.sendError == EPERM || record.sendError == EAGAIN else {
                    fuzzFailure("record \(index): sendmsg failed with errno \(record.sendError)")
                }
                if input.refusesPorts && !descriptors.isEmpty && record.sendError == EPERM { continue }
                if record.sendError == EAGAIN { break }
                continue
            }
            if input.record.isEmpty && descriptors.isEmpty { break }  // end of stream
            if input.refusesPorts && !descriptors.isEmpty {
                // A kernel without SO_PASSRIGHTS let it through: the owner drops it, reports it.
                guard errors.popFirst() == .portsRefused else {
                    fuzzFailure("record \(index): a frame with descriptors to a refusing port was not reported as .portsRefused")
                }
                continue
            }
            // No hostile descriptor is a sealed memfd: a frame with MEMORY is never delivered.
            guard case .success(let frame) = verdict, deliverable,
                  !frame.components.contains(where: { if case .memory = $0 { true } else { false } }) else {
                guard errors.popFirst() != nil else { fuzzFailure("record \(index): a rejected record (\(verdict)) was not reported") }
                break  // the connection is dropped: what followed it is never read
            }
            guard let message = messages.popFirst() else {
                fuzzFailure("record \(index): a valid frame was not delivered (reports \(Array(errors)))")
            }
            check(message, against: frame, sender: record.sender)
        }
        guard messages.isEmpty, errors.isEmpty else {
            fuzzFailure("delivered \(messages.count) messages and reported \(Array(errors)) beyond the records sent")
        }
    }

    private func check(_ message: MessagePort.Message, against frame: PortFrame, sender: MessagePort.Sender) {
        guard message.msgid == frame.msgid, message.components.count == frame.components.count,
              (message.replyPort != nil) == frame.hasReplyPort, message.metadata == frame.metadata else {
            fuzzFailure("delivered \(message) for \(frame)")
        }
        for (component, expected) in zip(message.components, frame.components) {
            switch (component, expected) {
            case (.data(let data), .data(let bytes)) where Array(data) == bytes: continue
            case (.port(let proxy), .port) where proxy.isProxy: continue
            default: fuzzFailure("delivered \(component) for \(expected)")
            }
        }
        // A frame that came through a socket always has a sender (§3.32).
        guard message.sender == sender else {
            fuzzFailure("sender \(String(describing: message.sender)), expected \(sender)")
        }
        // Pinned where the kernel could, and then to the process that sent it: never another.
        if let process = message.sender?.process {
            guard let expected = try? PinnedProcess(pid: sender.pid), process == expected else {
                fuzzFailure("a frame from pid \(sender.pid) was pinned to \(process)")
            }
        }
    }

    private func isSeqPacket(_ descriptor: Int32) -> Bool {
        var type: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        return getsockopt(descriptor, SOL_SOCKET, SO_TYPE, &type, &length) == 0 && type == Int32(SOCK_SEQPACKET.rawValue)
    }
}

#if RUNLOOPKIT_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    FrameReceiveTarget.shared.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
@main
enum FuzzFrameReceive {
    static func main() { Replay.main(FrameReceiveTarget.shared.run) }
}
#endif

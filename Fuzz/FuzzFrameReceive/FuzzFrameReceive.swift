// libFuzzer target: one receive on a port's connection, descriptors and credentials included
// (Protocols/port-message-frame.md §5.1–§6, the SCM_RIGHTS/SCM_CREDENTIALS path).
//
// Input: `FrameInput`. Each input is sent as one record, with its descriptors (real ones, of
// every kind) and optionally an explicit SCM_CREDENTIALS, on a new send right of a port whose
// loop runs on this thread; the send right is closed after it. Properties checked:
// - the receiver never crashes or hangs: the connection is dropped (at end of stream or for a
//   malformed frame) and the loop returns;
// - at most one message is delivered, only for a frame `PortFrame.decode` accepts, with one
//   proxy per PORT component and the reply port when the frame has one, and `sender` set to
//   the process that sent it;
// - a rejected frame is reported once, with a reason; an accepted one is not reported;
// - the process holds exactly the descriptors it held before the input.

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
        let right: Int32
        do { right = try port.makeSendRight() } catch { fuzzFailure("makeSendRight: \(error)") }
        let descriptors = hostile.pick(input.descriptorCount, kinds: input.descriptorKinds)
        // As root, a claim to be another process (pid 1) with another uid and gid, which the
        // kernel allows with CAP_SYS_ADMIN and refuses (EPERM) otherwise.
        let root = geteuid() == 0
        let claimed = Claim(pid: root ? 1 : getpid(), id: root ? input.claimedID : geteuid())
        let sent = descriptors.withUnsafeBufferPointer { fds in
            fuzz_sendmsg(right, input.record.baseAddress, input.record.count, fds.baseAddress, Int32(fds.count),
                         input.explicitCredentials ? 1 : 0, claimed.pid, claimed.id, claimed.id, 0)
        }
        let sendError = sent < 0 ? errno : 0
        close(right)
        LoopDriver.run(until: { [port] in port.connectionCount == 0 }, "the port to drop the connection")

        // The messages (and the proxies they carry) are gone before the descriptors are counted.
        check(record: input, descriptors: descriptors, claimed: claimed, sendError: sendError)
        expectNoDescriptorLeak(since: before, after: "a record of \(input.record.count) bytes with \(descriptors.count) descriptors")
    }

    private func check(record input: FrameInput, descriptors: [Int32], claimed: Claim, sendError: Int32) {
        let messages = delivered.take()
        let errors = reported.take()
        let verdict: Result<PortFrame, FrameError>
        do { verdict = .success(try PortFrame.decode(Array(input.record), descriptorCount: descriptors.count)) } catch {
            verdict = .failure(error)
        }
        if sendError != 0 || (input.record.isEmpty && descriptors.isEmpty) {
            // The kernel refused the record (EPERM for a claim it does not allow), or it was
            // the empty record that means end of stream: nothing may arrive.
            guard messages.isEmpty, errors.isEmpty else {
                fuzzFailure("a record never sent (errno \(sendError)) produced \(messages) \(errors)")
            }
        } else if case .success(let frame) = verdict, descriptors.count <= 65,
                  descriptors.allSatisfy({ $0 == hostile.sendRight || isSeqPacket($0) }) {
            guard messages.count == 1, errors.isEmpty, let message = messages.first else {
                fuzzFailure("a valid frame gave \(messages.count) messages and reports \(errors)")
            }
            // A frame this process sent has no sender (§3.27), unless it claimed another pid.
            let sender = input.explicitCredentials && claimed.pid != getpid()
                ? MessagePort.Sender(pid: claimed.pid, uid: claimed.id, gid: claimed.id) : nil
            check(message, against: frame, sender: sender)
        } else {
            guard messages.isEmpty, errors.count == 1 else {
                fuzzFailure("a rejected record (\(verdict)) gave \(messages.count) messages and reports \(errors)")
            }
        }
    }

    private struct Claim {
        var pid: Int32
        var id: UInt32
    }

    private func check(_ message: MessagePort.Message, against frame: PortFrame, sender: MessagePort.Sender?) {
        guard message.msgid == frame.msgid, message.components.count == frame.components.count,
              (message.replyPort != nil) == frame.hasReplyPort else {
            fuzzFailure("delivered \(message) for \(frame)")
        }
        for (component, expected) in zip(message.components, frame.components) {
            switch (component, expected) {
            case (.data(let data), .data(let bytes)) where Array(data) == bytes: continue
            case (.port(let proxy), .port) where proxy.isProxy: continue
            default: fuzzFailure("delivered \(component) for \(expected)")
            }
        }
        guard message.sender == sender else {
            fuzzFailure("sender \(String(describing: message.sender)), expected \(String(describing: sender))")
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

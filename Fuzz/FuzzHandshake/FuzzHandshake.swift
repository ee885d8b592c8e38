// libFuzzer target: the named-port handshake (Protocols/named-ports.md §4–6), both sides.
//
// Input: one options byte, then one handshake record.
//
//     0  1  options: bits 0–1 the descriptors attached to the record (0–3, of every kind in
//           `HostileDescriptors`); bit 2 an explicit SCM_CREDENTIALS (as root: claiming pid 1
//           and the uid/gid of bits 5–7); bit 3 after a WELCOME, send one frame; bit 4 the
//           client side (the record is a fake owner's answer to `connect(to:)`)
//     1  …  the record
//
// The owner's name differs from process to process (names are shared by the whole host), so
// a HELLO naming `placeholder` has it replaced by the owner's name, of the same length: the
// seeds and the inputs libFuzzer finds reach WELCOME in every run.
//
// Properties checked for every input:
// - `Handshake.decode` agrees with `ReferenceHandshake`, §4.3 read from the specification, on
//   both sides; a record it accepts re-encodes to exactly its bytes;
// - owner side: a published port, connected to by this thread, answers exactly as §4.2, §4.3
//   and §5 say (WELCOME, DENIED, UNKNOWN_NAME or a silent close), reports exactly the reason
//   §6 gives, delivers the frame sent after a WELCOME and nothing else, and holds the same
//   descriptors afterwards;
// - client side: `connect(to:)` against an owner answering this record returns a proxy or
//   throws exactly what §4.1 says, and leaks no descriptor.

#if canImport(Glibc)
import Glibc
#endif
import CFuzzSupport
import FoundationEssentials
import FuzzSupport
import RunLoopKit

final class HandshakeTarget: Sendable {
    static let shared = HandshakeTarget()

    static let placeholder = Array("fuzz.handshake.XXXXXXXX".utf8)
    let ownerName = {
        let pid = String(getpid(), radix: 16)
        return "fuzz.handshake." + String(repeating: "0", count: 8 - pid.count) + pid
    }()
    let clientName = "fuzz-client-\(getpid())"
    let owner: MessagePort
    nonisolated(unsafe) let hostile: HostileDescriptors
    let delivered = Inbox<MessagePort.Message>()
    let reported = Inbox<PortError>()
    /// The fake owner of `clientName`: a listening socket that `fakeOwner` answers on.
    let fakeListener: Int32
    let fakeOwner = ResidentThread(name: "fuzz fake owner")

    private init() {
        hostile = HostileDescriptors()
        do {
            owner = try MessagePort()
            try owner.publish(as: ownerName)
            // Every refused handshake must be reported: the target checks each one (§6).
            owner.reportEveryRefusal()
        } catch {
            fuzzFailure("cannot publish the owner: \(error)")
        }
        owner.setHandler { [delivered] message in delivered.append(message) }
        owner.setTransportErrorHandler { [reported] error in reported.append(error) }
        ThreadRunLoop.current.add(owner, forMode: LoopDriver.mode)
        let address = Self.address(clientName)
        fakeListener = address.withUnsafeBytes { fuzz_listen_abstract($0.baseAddress, $0.count) }
        guard fakeListener >= 0 else { fuzzFailure("cannot listen as the fake owner: \(errno)") }
        LoopDriver.prepare()
    }

    static func address(_ name: String) -> [UInt8] { Array("runloopkit/\(geteuid())/\(name)".utf8) }

    func run(_ bytes: UnsafeRawBufferPointer) {
        guard let options = bytes.first else { return }
        var record = Array(bytes.dropFirst())
        let nameRange = 8..<8 + Self.placeholder.count
        if record.count >= nameRange.upperBound, record[nameRange].elementsEqual(Self.placeholder) {
            record.replaceSubrange(nameRange, with: Array(ownerName.utf8))
        }
        checkDecoders(record)
        let descriptors = hostile.pick(Int(options & 0x03), kinds: Int(options >> 5) + 1)
        let root = geteuid() == 0
        let claim = options & 0x04 == 0 ? nil : (pid: root ? 1 : getpid(), id: root ? UInt32(options >> 5) : geteuid())
        let before = openDescriptors()
        if options & 0x10 == 0 {
            ownerSide(record, descriptors: descriptors, claim: claim, sendFrame: options & 0x08 != 0)
        } else {
            clientSide(record, descriptors: descriptors)
        }
        expectNoDescriptorLeak(since: before, after: "a handshake of \(record.count) bytes with \(descriptors.count) descriptors")
    }

    // MARK: - Decoders

    private func checkDecoders(_ record: [UInt8]) {
        for side in [Handshake.Expected.hello, .answer] {
            let expected = ReferenceHandshake.decode(record, owner: side == .hello)
            do {
                let decoded = try Handshake.decode(record, expecting: side)
                guard case .success = expected else { fuzzFailure("\(side): accepted \(decoded), §4.3 says \(expected)") }
                guard decoded.encode() == record else { fuzzFailure("\(side): \(decoded) re-encodes to other bytes") }
            } catch {
                guard case .failure(let reason) = expected, reason == error else {
                    fuzzFailure("\(side): rejected with \(error), §4.3 says \(expected)")
                }
            }
        }
    }

    // MARK: - Owner side

    private enum OwnerAnswer: Equatable {
        case welcome, denied, unknownName, silentClose
    }

    private func ownerSide(_ record: [UInt8], descriptors: [Int32], claim: (pid: Int32, id: UInt32)?, sendFrame: Bool) {
        let address = Self.address(ownerName)
        let client = address.withUnsafeBytes { fuzz_connect_abstract($0.baseAddress, $0.count) }
        guard client >= 0 else { fuzzFailure("cannot connect to the owner: \(errno)") }
        let sent = descriptors.withUnsafeBufferPointer { fds in
            fuzz_sendmsg(client, record, record.count, fds.baseAddress, Int32(fds.count),
                         claim == nil ? 0 : 1, claim?.pid ?? 0, claim?.id ?? 0, claim?.id ?? 0, 0)
        }
        // A record the kernel refused (a claim it does not allow) is a client that never said
        // HELLO: closing it is end of stream to the owner.
        if sent < 0 { shutdown(client, Int32(SHUT_WR)) }
        LoopDriver.run(until: { [self] in isReadable(client) }, "the owner's answer")
        let answer = receive(client)

        let expected: (answer: OwnerAnswer, report: PortError?)
        if sent < 0 || (record.isEmpty && descriptors.isEmpty) {
            expected = (.silentClose, nil)
        } else if !descriptors.isEmpty || record.count > 109 {
            expected = (.silentClose, .handshakeFailed(.unexpectedControlMessage))
        } else {
            switch ReferenceHandshake.decode(record, owner: true) {
            case .failure(let reason):
                expected = (.silentClose, .handshakeFailed(reason))
            case .success(let name) where name != Array(ownerName.utf8):
                expected = (.unknownName, .handshakeFailed(.wrongName))
            case .success where claim != nil && claim!.id != geteuid():
                expected = (.denied, .accessDenied)
            case .success where claim != nil && claim!.pid != getpid():
                // Credentials naming another process than the connector's (§3.61).
                expected = (.denied, .forgedCredentials)
            case .success:
                expected = (.welcome, nil)
            }
        }
        let got: OwnerAnswer? = switch answer {
        case []: .silentClose
        case Handshake.welcome.encode(): .welcome
        case Handshake.denied.encode(): .denied
        case Handshake.unknownName.encode(): .unknownName
        default: nil
        }
        guard got == expected.answer else { fuzzFailure("owner answered \(answer), §4 says \(expected.answer)") }
        var frames = 0
        if got == .welcome, sendFrame {
            let frame: [UInt8] = Array("RLKM".utf8) + [1, 0, 1, 0, 7, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0] + Array("hi".utf8)
            guard fuzz_sendmsg(client, frame, frame.count, nil, 0, 0, 0, 0, 0, 0) == frame.count else {
                fuzzFailure("cannot send a frame after WELCOME: \(errno)")
            }
            frames = 1
        }
        close(client)
        LoopDriver.run(until: { [owner] in owner.connectionCount == 0 }, "the owner to drop the connection")
        let messages = delivered.take()
        let reports = reported.take()
        guard reports == (expected.report.map { [$0] } ?? []) else {
            fuzzFailure("owner reported \(reports), §6 says \(String(describing: expected.report))")
        }
        guard messages.count == frames, messages.allSatisfy({ $0.msgid == 7 && $0.data == Data("hi".utf8) }) else {
            fuzzFailure("owner delivered \(messages) after \(frames) frames")
        }
    }

    // MARK: - Client side

    private func clientSide(_ record: [UInt8], descriptors: [Int32]) {
        let listener = fakeListener
        do {
            try fakeOwner.perform {
                let connection = accept(listener, nil, nil)
                guard connection >= 0 else { fuzzFailure("the fake owner cannot accept: \(errno)") }
                var hello = [UInt8](repeating: 0, count: 256)
                _ = recv(connection, &hello, hello.count, 0)
                _ = descriptors.withUnsafeBufferPointer { fds in
                    fuzz_sendmsg(connection, record, record.count, fds.baseAddress, Int32(fds.count), 0, 0, 0, 0, 0)
                }
                close(connection)
            }
        } catch {
            fuzzFailure("the fake owner's thread stopped")
        }
        let outcome: Result<MessagePort, PortError>
        do { outcome = .success(try MessagePort.connect(to: clientName, publishedBy: geteuid())) } catch {
            outcome = .failure(error)
        }
        do { try fakeOwner.perform(waitUntilDone: true) {} } catch { fuzzFailure("the fake owner's thread stopped") }

        let expected: Result<Void, PortError>
        if !descriptors.isEmpty || record.count > 109 {
            expected = .failure(.handshakeFailed(.unexpectedControlMessage))
        } else if record.isEmpty {
            expected = .failure(.nameNotFound(clientName))
        } else {
            switch ReferenceHandshake.decode(record, owner: false) {
            case .failure(let reason): expected = .failure(.handshakeFailed(reason))
            case .success where record[5] == 2: expected = .success(())
            case .success where record[5] == 3: expected = .failure(.accessDenied)
            case .success where record[5] == 5: expected = .failure(.tooManyConnections)
            case .success: expected = .failure(.nameNotFound(clientName))
            }
        }
        switch (outcome, expected) {
        case (.success(let proxy), .success):
            guard proxy.isProxy else { fuzzFailure("connect(to:) returned a local port") }
            proxy.invalidate()
        case (.failure(let error), .failure(let wanted)) where error == wanted:
            break
        default:
            fuzzFailure("connect(to:) gave \(outcome), §4.1 says \(expected)")
        }
    }

    private func isReadable(_ descriptor: Int32) -> Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    private func receive(_ descriptor: Int32) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 256)
        let n = recv(descriptor, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        return n > 0 ? Array(buffer[0..<n]) : []
    }
}

/// §4.3 H3–H9 as written; the success value is the name (empty for an answer).
enum ReferenceHandshake {
    static func decode(_ record: [UInt8], owner: Bool) -> Result<[UInt8], HandshakeError> {
        guard record.count >= 8 else { return .failure(.truncated) }
        guard record[0] == 0x52, record[1] == 0x4C, record[2] == 0x4B, record[3] == 0x4E else { return .failure(.badMagic) }
        guard record[4] == 1 else { return .failure(.unsupportedVersion) }
        guard owner ? record[5] == 1 : (2...5).contains(record[5]) else { return .failure(.unexpectedKind) }
        guard record[7] == 0 else { return .failure(.reservedBytes) }
        guard record.count == 8 + Int(record[6]) else { return .failure(.lengthMismatch) }
        let name = Array(record[8...])
        if owner {
            let allowed = name.allSatisfy {
                (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0)
                    || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D
            }
            guard (1...100).contains(name.count), allowed else { return .failure(.invalidName) }
        } else {
            guard name.isEmpty else { return .failure(.invalidName) }
        }
        return .success(name)
    }
}

#if RUNLOOPKIT_FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    HandshakeTarget.shared.run(UnsafeRawBufferPointer(start: data, count: size))
    return 0
}
#else
@main
enum FuzzHandshake {
    static func main() { Replay.main(HandshakeTarget.shared.run) }
}
#endif

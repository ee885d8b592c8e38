// Test 6: 100,000 random and mutated frames (5,000 under RUNLOOPKIT_SANITIZER), many with random
// descriptors attached, written into connections of a port whose loop runs on a thread.
// Afterwards: no crash, the process holds exactly the descriptors it held before, and a
// well-formed message sent afterwards is delivered.
//
// It runs as an exit test, in a child process of its own: the descriptor count of a process
// is only meaningful when no other test opens descriptors at the same time, and a crash of
// the receiver fails this test instead of killing the whole test run.

import CRunLoopKit
import Glibc
import FoundationEssentials
import Synchronization
import Testing
@testable import RunLoopKit

/// A small, seedable generator, so that a failing run can be replayed
/// (RUNLOOPKIT_FUZZ_SEED=<seed>).
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

enum Fuzz {
    static let finalMsgid: UInt32 = 0xC0FF_EE00

    struct Report {
        var failures: [String] = []
        var sent = 0
        var reconnects = 0
        var skipped = 0
    }

    /// Runs the fuzz; returns what went wrong (empty: passed) and statistics.
    static func run(frames: Int, seed: UInt64) -> (failures: [String], summary: String) {
        var rng = SplitMix64(state: seed)
        var report = Report()

        // ---- Receiver, set up before the baseline (its connection set is made lazily by the
        // first send right, so make and close one first).
        let port: MessagePort
        let victim: MessagePort
        do {
            port = try MessagePort()
            victim = try MessagePort()
        } catch {
            return (["MessagePort() threw \(error)"], "")
        }
        let delivered = Atomic<Int>(0)
        let finalText = Locked<String?>(nil)
        let transportErrors = Locked<[FrameError: Int]>([:])
        let otherErrors = Locked<[PortError]>([])
        port.setHandler { message in
            // The message (and every proxy it carries) is dropped when this returns.
            delivered.wrappingAdd(1, ordering: .relaxed)
            if message.msgid == finalMsgid {
                finalText.withLock { $0 = message.text ?? "" }
            }
        }
        port.setTransportErrorHandler { error in
            if case .malformedFrame(let reason) = error {
                transportErrors.withLock { $0[reason, default: 0] += 1 }
            } else {
                otherErrors.withLock { $0.append(error) }
            }
        }
        // The victim: a second port whose send rights are attached to frames (genuine send
        // rights, delivered as proxies when a frame is valid). Its loop drops closed connections.
        victim.setHandler { _ in }
        let thread = ResidentThread(name: "fuzz-receiver")
        thread.runLoop.add(port, forMode: .default)
        thread.runLoop.add(victim, forMode: .default)
        do {
            close(try port.makeSendRight())
            close(try victim.makeSendRight())
        } catch {
            return (["makeSendRight threw \(error)"], "")
        }
        guard waitUntil(timeout: waitLimit, { port.connectionCount == 0 && victim.connectionCount == 0 }) else {
            return (["a closed send right's connection was never dropped"], "")
        }

        let baseline = openDescriptorCount()

        // ---- Descriptors to attach: every kind a hostile peer could send.
        var pool: [Int32] = []
        var seqPacketPool: [Int32] = []
        let pipeEnds = closeOnExecPipe()
        pool += [pipeEnds.read, pipeEnds.write]
        pool.append(eventfd(0, Int32(EFD_CLOEXEC)))
        pool.append(open("/dev/null", O_RDWR | O_CLOEXEC))
        for type in [SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET] {
            var ends: [Int32] = [-1, -1]
            _ = socketpair(AF_UNIX, Int32(type.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &ends)
            pool += ends
            if type == SOCK_SEQPACKET { seqPacketPool += ends }
        }
        if let right = try? victim.makeSendRight() {
            pool.append(right)
            seqPacketPool.append(right)
        }
        if pool.contains(where: { $0 < 0 }) {
            return (["could not create the descriptor pool"], "")
        }

        // ---- Frames.
        var connection: SeqPacketSocket?
        var framesLeftOnConnection = 0

        func reconnect() -> Bool {
            connection?.close()
            connection = nil
            do {
                let right = try port.makeSendRight()
                connection = try SeqPacketSocket(adopting: FileDescriptor(rawValue: right))
            } catch {
                report.failures.append("could not make a send right after \(report.sent) frames: \(error)")
                return false
            }
            report.reconnects += 1
            framesLeftOnConnection = Int.random(in: 1...8, using: &rng)
            return true
        }

        for index in 0..<frames {
            if connection == nil || framesLeftOnConnection == 0 {
                guard reconnect() else { break }
            }
            framesLeftOnConnection -= 1
            let bytes = makeFrame(&rng)
            let attached = makeDescriptors(for: bytes, pool: pool, seqPacketPool: seqPacketPool, &rng)
            // Now and then, a send right to the very connection the frame travels on.
            let attachSelf = Int.random(in: 0..<500, using: &rng) == 0

            var attempts = 0
            sending: while true {
                attempts += 1
                let descriptors = attachSelf ? attached + [connection!.descriptor.rawValue] : attached
                do {
                    try connection!.send(bytes, descriptors: descriptors)
                    report.sent += 1
                    break sending
                } catch {
                    switch error.rawValue {
                    case EAGAIN:
                        guard connection!.waitUntilWritable(deadline: .now + waitLimit) else {
                            report.failures.append("the receiver stopped draining (frame \(index))")
                            break sending
                        }
                    case EPIPE, ECONNRESET:
                        // The receiver dropped this connection after a malformed frame.
                        guard attempts < 3, reconnect() else { break sending }
                    case EMSGSIZE, ETOOMANYREFS, ENOBUFS:
                        report.skipped += 1
                        break sending
                    case EBADF:
                        // One of this process's own descriptors was closed behind its back.
                        let closed = ([connection!.descriptor.rawValue] + descriptors).filter { fcntl($0, F_GETFD) < 0 }
                        report.failures.append("send failed with \(error) (frame \(index)): descriptors \(Set(closed).sorted()) "
                            + "were closed by someone else (connection \(connection!.descriptor.rawValue), pool \(pool))")
                        break sending
                    default:
                        report.failures.append("send failed with \(error) (frame \(index))")
                        break sending
                    }
                }
            }
            if !report.failures.isEmpty { break }
            // Keep the receiver's backlog of connections bounded.
            if index % 128 == 0 && port.connectionCount > 1000 {
                if !waitUntil(timeout: waitLimit, { port.connectionCount < 100 }) {
                    report.failures.append("connections are not being read: \(port.connectionCount) open")
                    break
                }
            }
        }
        connection?.close()
        connection = nil

        // ---- Afterwards: a well-formed message is delivered…
        do {
            let proxy = try MessagePort(sendRight: port.makeSendRight())
            let component = try MessagePort(sendRight: victim.makeSendRight())
            try proxy.send(msgid: finalMsgid, components: [.data(Data("after the fuzz".utf8)), .port(component)],
                           timeout: waitLimit)
        } catch {
            report.failures.append("sending a well-formed message after the fuzz threw \(error)")
        }
        if !waitUntil(timeout: .seconds(30), { finalText.withLock { $0 } != nil }) {
            report.failures.append("the well-formed message sent after the fuzz was not delivered")
        } else if finalText.withLock({ $0 }) != "after the fuzz" {
            report.failures.append("the message after the fuzz arrived as \(finalText.withLock { $0 } ?? "")")
        }
        if !port.isValid { report.failures.append("the port became invalid") }

        // ---- …and nothing leaked: every connection closed by its sender is dropped, every
        // received descriptor closed. Since the baseline, only the pool is open, plus the
        // victim's connection for the send right in the pool.
        let expected = baseline + pool.count + 1
        let settled = waitUntil(timeout: .seconds(30)) {
            port.connectionCount == 0 && port.queuedCount == 0 && victim.connectionCount == 1
                && openDescriptorCount() == expected
        }
        if !settled {
            report.failures.append("descriptors: \(openDescriptorCount()) open, expected \(expected) (baseline \(baseline), "
                + "pool \(pool.count), 1 victim connection); port connections \(port.connectionCount), "
                + "queued \(port.queuedCount); victim connections \(victim.connectionCount)")
        }
        for descriptor in pool { close(descriptor) }

        let reasons = transportErrors.withLock { $0 }
        let others = otherErrors.withLock { $0 }
        if reasons.isEmpty { report.failures.append("no frame was rejected: the fuzz did not reach the receiver") }
        if delivered.load(ordering: .relaxed) < 2 { report.failures.append("no fuzzed frame was valid and delivered") }
        let summary = "seed \(seed): \(report.sent) frames sent on \(report.reconnects) connections, \(report.skipped) refused by "
            + "the kernel, \(delivered.load(ordering: .relaxed)) delivered, rejected: "
            + reasons.sorted { $0.key.rawValue < $1.key.rawValue }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
            + (others.isEmpty ? "" : "; other transport errors: \(others)")
        port.invalidate()
        victim.invalidate()
        thread.stop()
        return (report.failures, summary)
    }

    // MARK: Frame generation

    static func validFrame(_ rng: inout SplitMix64) -> [UInt8] {
        var components: [PortFrame.Component] = []
        let count = Int.random(in: 0...(Int.random(in: 0..<20, using: &rng) == 0 ? 64 : 6), using: &rng)
        var budget = PortFrame.maximumFrameSize - 16 - 8 * count
        for _ in 0..<count {
            if Bool.random(using: &rng) {
                components.append(.port)
            } else {
                let big = budget >= 1000 && Int.random(in: 0..<50, using: &rng) == 0
                let length = min(budget, big ? Int.random(in: 1000...budget, using: &rng) : Int.random(in: 0...40, using: &rng))
                budget -= length
                components.append(.data((0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }))
            }
        }
        let frame = PortFrame(msgid: UInt32.random(in: 0...UInt32.max, using: &rng), components: components,
                              hasReplyPort: Bool.random(using: &rng))
        return (try? frame.encode()) ?? []
    }

    static func makeFrame(_ rng: inout SplitMix64) -> [UInt8] {
        let choice = Int.random(in: 0..<100, using: &rng)
        if choice < 10 { return validFrame(&rng) }
        if choice < 22 {
            // Random bytes, sometimes behind a valid magic and version.
            var bytes = (0..<Int.random(in: 0...96, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            if Bool.random(using: &rng) && bytes.count >= 5 { bytes.replaceSubrange(0..<5, with: [0x52, 0x4C, 0x4B, 0x4D, 1]) }
            return bytes
        }
        if choice < 23 {
            // Oversized records.
            var bytes = validFrame(&rng)
            let size = Int.random(in: 65537...100_000, using: &rng)
            if bytes.count < size { bytes += [UInt8](repeating: UInt8.random(in: 0...255, using: &rng), count: size - bytes.count) }
            return bytes
        }
        var bytes = validFrame(&rng)
        for _ in 0..<Int.random(in: 1...3, using: &rng) { mutate(&bytes, &rng) }
        return bytes
    }

    static func mutate(_ bytes: inout [UInt8], _ rng: inout SplitMix64) {
        func setLE32(_ offset: Int, _ value: UInt32) {
            guard bytes.count >= offset + 4 else { return }
            for index in 0..<4 { bytes[offset + index] = UInt8(truncatingIfNeeded: value >> (8 * index)) }
        }
        func le32(_ offset: Int) -> UInt32 {
            guard bytes.count >= offset + 4 else { return 0 }
            return (0..<4).reduce(0) { $0 | UInt32(bytes[offset + $1]) << (8 * $1) }
        }
        let entries = bytes.count >= 8 ? min(Int(bytes[6]) | Int(bytes[7]) << 8, max(0, (bytes.count - 16) / 8)) : 0
        switch Int.random(in: 0..<11, using: &rng) {
        case 0:  // flip bytes anywhere
            guard !bytes.isEmpty else { return }
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                bytes[Int.random(in: 0..<bytes.count, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
            }
        case 1:  // flip a header byte
            guard bytes.count >= 16 else { return }
            bytes[Int.random(in: 0..<16, using: &rng)] ^= UInt8.random(in: 1...255, using: &rng)
        case 2:  // truncate
            guard !bytes.isEmpty else { return }
            bytes.removeLast(Int.random(in: 1...bytes.count, using: &rng))
        case 3:  // extra bytes
            bytes += (0..<Int.random(in: 1...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        case 4:  // component count off by a little or a lot
            guard bytes.count >= 8 else { return }
            let count = Int(bytes[6]) | Int(bytes[7]) << 8
            let new = Bool.random(using: &rng) ? count + Int.random(in: -2...2, using: &rng) : Int.random(in: 0...0xFFFF, using: &rng)
            let value = UInt16(truncatingIfNeeded: new)
            bytes[6] = UInt8(value & 0xFF)
            bytes[7] = UInt8(value >> 8)
        case 5:  // body length off
            let body = le32(12)
            setLE32(12, Bool.random(using: &rng) ? body &+ UInt32(bitPattern: Int32.random(in: -3...3, using: &rng))
                                                  : UInt32.random(in: 0...UInt32.max, using: &rng))
        case 6:  // a component kind
            guard entries > 0 else { return }
            bytes[16 + 8 * Int.random(in: 0..<entries, using: &rng)] = UInt8.random(in: 0...255, using: &rng)
        case 7:  // a reserved byte of an entry
            guard entries > 0 else { return }
            bytes[16 + 8 * Int.random(in: 0..<entries, using: &rng) + Int.random(in: 1...3, using: &rng)] = UInt8.random(in: 1...255, using: &rng)
        case 8:  // an entry's length (a PORT with a length, a DATA longer or shorter)
            guard entries > 0 else { return }
            let offset = 16 + 8 * Int.random(in: 0..<entries, using: &rng) + 4
            setLE32(offset, Bool.random(using: &rng) ? le32(offset) &+ 1 : UInt32.random(in: 0...UInt32.max, using: &rng))
        case 9:  // flags
            guard bytes.count > 5 else { return }
            bytes[5] = UInt8.random(in: 0...255, using: &rng)
        default:  // insert or delete a byte in the middle
            guard !bytes.isEmpty else { return }
            let at = Int.random(in: 0..<bytes.count, using: &rng)
            if Bool.random(using: &rng) { bytes.remove(at: at) } else { bytes.insert(UInt8.random(in: 0...255, using: &rng), at: at) }
        }
    }

    /// The descriptors a frame claims (PORT entries + reply flag), read leniently.
    static func claimedDescriptors(_ bytes: [UInt8]) -> Int {
        guard bytes.count >= 16 else { return 0 }
        let count = min(Int(bytes[6]) | Int(bytes[7]) << 8, 64, (bytes.count - 16) / 8)
        let ports = (0..<count).filter { bytes[16 + 8 * $0] == 2 }.count
        return ports + Int(bytes[5] & 1)
    }

    static func makeDescriptors(for bytes: [UInt8], pool: [Int32], seqPacketPool: [Int32],
                                _ rng: inout SplitMix64) -> [Int32] {
        let claimed = claimedDescriptors(bytes)
        let count: Int
        var onlySendRights = false
        switch Int.random(in: 0..<100, using: &rng) {
        case 0..<25: count = 0
        case 25..<45: count = claimed; onlySendRights = true
        case 45..<65: count = claimed
        case 65..<75: count = max(0, claimed + Int.random(in: -1...1, using: &rng))
        case 75..<95: count = Int.random(in: 1...5, using: &rng)
        default: count = Int.random(in: 60...120, using: &rng)
        }
        let source = onlySendRights ? seqPacketPool : pool
        return (0..<count).map { _ in source[Int.random(in: 0..<source.count, using: &rng)] }
    }
}

/// The fuzz runs in a child process (this test binary again, filtered to `FuzzChildEntry`), so
/// that the descriptor count is exact while other tests run in parallel, and a crash fails this
/// test only. (Not a Swift Testing exit test: on Linux its monitor reaps every child of the
/// process, which steals the exits other tests' child processes are waiting for.)
@Suite("Fuzzing the receiver", .timeLimit(.minutes(10)))
struct FuzzTests {
    @Test("100,000 random and mutated frames with random descriptors: no crash, no leak, still delivering")
    func fuzz() async throws {
        let child = try ChildProcess("/proc/self/exe", ["--testing-library", "swift-testing", "--filter", "FuzzChildEntry"],
                                     environment: ["\(fuzzChildVariable)=1", "SWIFT_BACKTRACE=enable=no"])
        let exit = await offThePool { child.finish(timeout: .seconds(540)) }
        let output = child.output
        print(output, terminator: "")
        #expect(exit == .exited(0), "the fuzz process \(exit.map(\.description) ?? "did not finish"): \(output)")
        #expect(output.contains("fuzz: seed"), "the fuzz did not finish: \(output)")
        #expect(!output.contains("FAILED"), "\(output)")
    }
}

let fuzzChildVariable = "RUNLOOPKIT_FUZZ_CHILD"

/// The child side of `FuzzTests`. Skipped in normal runs.
@Suite("Fuzz child entry (child process only)")
struct FuzzChildEntry {
    @Test("child: run the fuzz and report on stderr", .enabled(if: getenv(fuzzChildVariable) != nil))
    func runFuzz() {
        let frames = getenv("RUNLOOPKIT_SANITIZER") != nil ? 5_000 : 100_000
        let seed = getenv("RUNLOOPKIT_FUZZ_SEED").flatMap { UInt64(String(cString: $0)) }
            ?? UInt64.random(in: 0...UInt64.max)
        let (failures, summary) = Fuzz.run(frames: frames, seed: seed)
        var text = Array("fuzz: \(summary)\n".utf8)
        for failure in failures { text += Array("FAILED: \(failure)\n".utf8) }
        _ = write(STDERR_FILENO, &text, text.count)
        // Failures are reported on stderr; the exit status only tells whether the process survived.
        exit(EXIT_SUCCESS)
    }
}

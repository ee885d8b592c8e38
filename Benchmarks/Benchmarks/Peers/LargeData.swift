import CBenchmarkPeers
import Foundation
import Glibc
import RunLoopKit
import Synchronization

/// The `xlarge` workload (DESIGN §5, fourth round): a Data of N bytes to another process and an
/// 8-byte acknowledgement back, the receiver reading its first and last byte, at 64 KiB, 1 MiB,
/// 16 MiB and 256 MiB (`LargeDataPlan`).
///
/// The rows, each a point per size:
/// - **C memfd + SCM_RIGHTS**, the floor: create, write, seal, send, check the seals, map, unmap
///   (`bench_memfd_xlarge_open`); **C SOCK_STREAM copy**; **C sd-bus p2p** with an `ay` argument
///   (no 256 MiB point: a D-Bus array holds at most 64 MiB).
/// - **RunLoopKit SealedMemory**: each message a Data made with
///   `SealedMemory.data(count:initializingWith:)`, whose initializer writes the first and last
///   byte. Making it is inside the timed round, as the floor's create, write and seal are: a
///   producer pays for it with every message, and it is what the bar compares.
/// - **RunLoopKit** (an ordinary Data): one Data of N bytes made before the round (its first
///   and last byte set in place per message), which the transport copies into new sealed memory
///   at the send; beside it, in the same alternation, **memcpy of N** into new memory, so that
///   its bar can read "the floor plus one copy".
/// - **RunLoopKit inline vs sealed**: the bisection of `inlineDataLimit`, below.
///
/// Both RunLoopKit rows alternate with the C memfd floor in one process (`Interleaved`), as DESIGN
/// asks of every row a bar compares with a C floor in another process. Unlike the other
/// interleaved rows, a segment does not start afresh: spawning a responder costs tens of
/// milliseconds, more than a 16 MiB segment, so the RunLoopKit responder (`LargeDataLink`) and the
/// C one (`CLargePeer`) each stay up for the whole row, and each segment is a stretch of rounds
/// with one warm-up round.
enum LargeData {
    /// A frame's header (16 bytes) and one component entry (8 bytes): a Data of k KiB minus this
    /// fills a frame of exactly k KiB.
    static let frameHeadroom = 24
    /// The largest Data one frame carries inline (Protocols/port-message-frame.md §3.4).
    static let largestInline = MessagePort.maximumFrameSize - frameHeadroom
    /// The bisection of `inlineDataLimit`: frames of 8 to 64 KiB, up to the limit (65,512 bytes). At
    /// each size the same Data goes inline and as sealed memory (forced either way through
    /// `MessagePort.appliedInlineDataLimit`), and a SealedMemory Data beside them, alternating in
    /// one process. The last point is 0.3.0's inline path at its largest, against which the
    /// fourth-round bar reads the path the limit chooses at 64 KiB.
    static let bisectionSizes = [8, 16, 24, 32, 48, 64].map { $0 << 10 - frameHeadroom }

    static func measure(_ benchmarkCase: BenchmarkCase, _ plan: LargeDataPlan) -> ScaleMeasurement {
        var points = Points()
        switch benchmarkCase.peer {
        case .cMemfd, .cStreamCopy, .cSdBus:
            let peer = switch benchmarkCase.peer {
            case .cMemfd: CLargePeer { bench_memfd_xlarge_open($0) }
            case .cStreamCopy: CLargePeer { bench_stream_xlarge_open($0) }
            default: CLargePeer { bench_sdbus_xlarge_open($0) }
            }
            for size in plan.sizes where benchmarkCase.peer != .cSdBus || size.bytes <= Int(BENCH_SDBUS_ARRAY_MAX) {
                points.add(size.bytes, peer.measure(bytes: size.bytes, size.plan.latency))
            }
            peer.close()
        case .runLoopKit, .runLoopKitSealedMemory:
            guard benchmarkCase.interleavedReference?.peer == .cMemfd else {
                fail("xlarge: \(benchmarkCase.peer.rawValue) has no C memfd floor to alternate with")
            }
            // Forked before the link exists, so that the C responder holds none of its descriptors.
            let floor = CLargePeer { bench_memfd_xlarge_open($0) }
            let link = LargeDataLink()
            let copied = benchmarkCase.peer == .runLoopKit
            for size in plan.sizes {
                let parts = Interleaved.measure(size.plan, configurations: copied ? 3 : 2, segments: size.segments) {
                    segment, configuration in
                    switch configuration {
                    case 0: link.measure(bytes: size.bytes, copied ? .copied : .sealedMemory, segment.latency)
                    case 1: floor.measure(bytes: size.bytes, segment.latency)
                    default:
                        link.withCopiedPayload(bytes: size.bytes) { source in
                            CPeers.latency(segment.latency) { bench_memcpy_xlarge(source.baseAddress, size.bytes, $0, $1) }
                        }
                    }
                }
                link.releasePayload()
                points.add(size.bytes, parts[0], reference: parts[1], beside: copied ? parts[2] : nil)
            }
            link.close()
            floor.close()
        case .runLoopKitInlineBisection:
            let link = LargeDataLink()
            for bytes in bisectionSizes {
                let parts = Interleaved.measure(plan.bisection.plan, configurations: 3, segments: plan.bisection.segments) {
                    segment, configuration in
                    switch configuration {
                    case 0: link.measure(bytes: bytes, .copied, inlineLimit: 0, segment.latency)
                    case 1: link.measure(bytes: bytes, .copied, inlineLimit: largestInline, segment.latency)
                    default: link.measure(bytes: bytes, .sealedMemory, inlineLimit: 0, segment.latency)
                    }
                }
                points.add(bytes, parts[0], reference: parts[1], beside: parts[2])
            }
            link.releasePayload()
            link.close()
        default:
            fail("no peer \(benchmarkCase.peer.rawValue) for xlarge")
        }
        return points.measurement
    }

    /// The smallest bisection size from which on the sealed path (`sealed` of a point) is no slower
    /// than the inline path (the point's reference) at every size measured; nil when it is slower
    /// at the largest.
    static func crossover(_ points: [ScalePoint], sealed: (ScalePoint) -> Double?) -> Int? {
        var from: Int?
        for point in points.sorted(by: { $0.parameter < $1.parameter }) {
            guard let inline = point.referenceP50, let sealed = sealed(point) else { return nil }
            if sealed <= inline { from = from ?? point.parameter } else { from = nil }
        }
        return from
    }

    /// The points of one row and the counters of their measured windows.
    private struct Points {
        var points: [ScalePoint] = []
        var messages = 0
        var allocations = bench_alloc_counts()

        mutating func add(_ bytes: Int, _ measurement: LatencyMeasurement, reference: LatencyMeasurement? = nil,
                          beside: LatencyMeasurement? = nil) {
            let summary = LatencySummary(measurement)
            points.append(ScalePoint(parameter: bytes, p50: summary.p50, p99: summary.p99,
                                     roundTripsPerSecond: 1e6 / summary.mean,
                                     allocationsPerMessage: measurement.allocations.allocationsPerMessage(measurement.messages),
                                     bytesPerMessage: measurement.allocations.bytesPerMessage(measurement.messages),
                                     referenceP50: reference.map { LatencySummary($0).p50 },
                                     besideP50: beside.map { LatencySummary($0).p50 }))
            messages += measurement.messages
            allocations.add(measurement.allocations)
        }

        var measurement: ScaleMeasurement {
            ScaleMeasurement(points: points, messages: messages,
                             allocations: AllocationWindow(begin: bench_alloc_counts(), end: allocations))
        }
    }

    // ---- The responder process -------------------------------------------------------------

    /// The RunLoopKit responder (`--xlarge-echo`): checks every message — its sequence, its one
    /// Data's first and last byte — and acknowledges it with what it received and whether the
    /// bytes came in sealed memory, until P's owner hangs up; then exits 0. Its handler reads the
    /// message as any receiver would: the Data, and with it the mapping, goes when the handler
    /// returns.
    static func serveEcho(_ echo: Options.LargeDataEcho) -> Never {
        guard let mapped = bench_responder_cell_map(echo.cellDescriptor) else {
            fail("RunLoopKit xlarge responder: cannot map the shared responder cell")
        }
        let cell = Cell(pointer: mapped)
        close(echo.cellDescriptor)
        let toInitiator: MessagePort
        do { toInitiator = try MessagePort(sendRight: echo.sendRight) } catch {
            fail("RunLoopKit xlarge responder: MessagePort(sendRight:): \(error)")
        }
        let loop = ThreadRunLoop.current
        let port = RunLoopKitPeer.makePort()
        let answered = Answered()
        port.setHandler { message in
            let seq = answered.value + 1
            guard message.msgid == UInt32(truncatingIfNeeded: seq), message.replyPort == nil, let data = message.data,
                  message.data(at: 1) == nil, message.port(at: 1) == nil, !data.isEmpty else {
                fail("RunLoopKit xlarge responder: message \(seq) arrived with msgid \(message.msgid) and \(message.components.count) components")
            }
            let right = data.withUnsafeBytes { bytes in
                bytes[0] == bench_xlarge_first_byte(seq) && bytes[bytes.count - 1] == bench_xlarge_last_byte(seq)
            }
            guard right else { fail("RunLoopKit xlarge responder: message \(seq) of \(data.count) bytes has a wrong first or last byte") }
            answered.value = seq
            bench_responder_cell_answer(cell.pointer, seq)
            let ack = bench_xlarge_ack(seq, UInt64(data.count), SealedMemory.contains(data) ? 1 : 0)
            do {
                try toInitiator.send(msgid: 1, components: [.data(Payloads.sequence(ack))], timeout: RunLoopKitPeer.sendTimeout)
            } catch PortError.invalidPort {
                loop.stop()  // the initiator is gone: it is the one to report why
            } catch {
                fail("RunLoopKit xlarge responder: acknowledgement failed: \(error)")
            }
        }
        toInitiator.setInvalidationHandler { _ in loop.stop() }
        loop.add(port, forMode: .default)
        loop.add(toInitiator, forMode: .default)
        do {
            try toInitiator.send(msgid: RunLoopKitPeer.helloMsgid, from: port, timeout: RunLoopKitPeer.sendTimeout)
        } catch {
            fail("RunLoopKit xlarge responder: hello failed: \(error)")
        }
        loop.run()
        exit(0)
    }

    /// The responder's cell. `@unchecked Sendable`: its fields are only stored atomically.
    private struct Cell: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<bench_responder_cell>
    }

    /// The responder's count of acknowledged messages; its main thread only.
    private final class Answered: @unchecked Sendable {
        var value: UInt64 = 0
    }
}

/// RunLoopKit's side of an xlarge row: port P on a resident thread, and a responder process
/// (this executable with `--xlarge-echo`) that inherited a send right to P and said hello with
/// its own port Q. Kept for the whole row; each `measure` is a run of round trips driven from
/// P's handler, as the xprocess row's: the next message is sent as soon as the acknowledgement
/// of the last is checked.
///
/// `@unchecked Sendable`: the run's state is set by the main thread before it hands the first
/// send to the initiator's thread (`perform` orders it), touched only there until `finished`,
/// and read back by the main thread after it.
final class LargeDataLink: @unchecked Sendable {
    enum Payload: Sendable {
        /// An ordinary Data, made once per size; the transport copies it into sealed memory.
        case copied
        /// A Data made per message with `SealedMemory.data(count:initializingWith:)`.
        case sealedMemory
    }

    private struct Run {
        var bytes: Int
        var payload: Payload
        /// Whether the responder must receive the bytes in sealed memory: above the limit in
        /// effect, or too large for a frame.
        var sealed: Bool
        var recorder: LatencyRecorder
        var sentAt: UInt64 = 0
    }

    private let initiator = ResidentThread(name: "xlarge-initiator")
    private let port = RunLoopKitPeer.makePort()
    private let cell: UnsafeMutablePointer<bench_responder_cell>
    private var pid: pid_t = 0
    private let connected = KernelEvent()
    private let finished = KernelEvent()
    /// The proxy for the responder's port Q, set by its hello.
    private var responder: MessagePort?
    private var run: Run?
    /// Messages sent over every run (the responder checks that they come in sequence).
    private var sent: UInt64 = 0
    /// The ordinary Data of the `.copied` runs, and where its bytes lie: a run fails if they
    /// move, which would mean the benchmark copied it itself (copy on write) besides the transport.
    private var block: Data?
    private var blockAddress: UnsafeRawPointer?

    init() {
        var cellDescriptor: Int32 = -1
        guard let cell = bench_responder_cell_create(&cellDescriptor) else {
            fail("RunLoopKit xlarge: cannot create the shared responder cell (memfd)")
        }
        self.cell = cell
        port.setHandler { [self] message in received(message) }
        initiator.runLoop.add(port, forMode: .default)
        let sendRight: Int32
        do { sendRight = try port.makeSendRight(inheritable: true) } catch {
            fail("RunLoopKit xlarge: makeSendRight(inheritable: true): \(error)")
        }
        // Spawned after `Pinning.apply`: in the pinned regime it inherits the one-CPU mask.
        pid = RunLoopKitPeer.spawnResponder(["--xlarge-echo", String(sendRight), String(cellDescriptor)])
        Glibc.close(sendRight)
        Glibc.close(cellDescriptor)
        connected.wait()
    }

    /// Round trips of `bytes`-byte messages until `plan` has its samples; `inlineLimit` is the
    /// limit the sends apply (`MessagePort.appliedInlineDataLimit`). Main thread.
    func measure(bytes: Int, _ payload: Payload, inlineLimit: Int = MessagePort.inlineDataLimit,
                 _ plan: LatencyPlan) -> LatencyMeasurement {
        guard let responder else { fail("RunLoopKit xlarge: no responder") }
        MessagePort.appliedInlineDataLimit.store(inlineLimit, ordering: .relaxed)
        if payload == .copied { prepareBlock(bytes) }
        run = Run(bytes: bytes, payload: payload, sealed: bytes > min(inlineLimit, LargeData.largestInline),
                  recorder: LatencyRecorder(plan: plan, messagesPerSample: 2))
        do { try initiator.perform { [self] in sendNext(to: responder) } } catch {
            fail("RunLoopKit xlarge: perform failed: \(error)")
        }
        finished.wait()
        let measurement = run!.recorder.measurement
        run = nil
        return measurement
    }

    /// Runs `body` over the ordinary Data of `bytes` bytes the `.copied` runs send. Main thread,
    /// between runs.
    func withCopiedPayload<R>(bytes: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        prepareBlock(bytes)
        return block!.withUnsafeBytes(body)
    }

    /// Frees the ordinary Data: each size's memory goes before the next size's is made.
    func releasePayload() {
        block = nil
        blockAddress = nil
    }

    /// Hangs up, reaps the responder and checks that it acknowledged every message. Main thread.
    func close() {
        responder?.setInvalidationHandler(nil)
        port.invalidate()
        responder?.invalidate()
        let status = RunLoopKitPeer.waitForExit(pid)
        guard status == 0 else { fail("RunLoopKit xlarge: the responder process exited with status \(status)") }
        let answered = bench_responder_cell_answered(cell)
        guard answered == sent else { fail("RunLoopKit xlarge: the responder acknowledged \(answered) messages, \(sent) were sent") }
        initiator.stop()
        bench_responder_cell_unmap(cell)
        releasePayload()
        MessagePort.appliedInlineDataLimit.store(MessagePort.inlineDataLimit, ordering: .relaxed)
    }

    private func prepareBlock(_ bytes: Int) {
        guard block?.count != bytes else { return }
        releasePayload()
        block = Data(repeating: UInt8(BENCH_XLARGE_FILL), count: bytes)
        blockAddress = block!.withUnsafeBytes { $0.baseAddress }
    }

    /// Initiator's thread: the hello, then the acknowledgement of each message.
    private func received(_ message: MessagePort.Message) {
        let now = bench_now_ns()
        guard let responder else { return hello(message) }
        guard let bytes = run?.bytes, let sealed = run?.sealed, let sentAt = run?.sentAt else {
            fail("RunLoopKit xlarge: an acknowledgement arrived outside a run")
        }
        guard Payloads.sequence(of: RunLoopKitPeer.data(of: message)) == bench_xlarge_ack(sent, UInt64(bytes), sealed ? 1 : 0) else {
            fail("RunLoopKit xlarge: wrong acknowledgement of message \(sent) (\(bytes) bytes, expected \(sealed ? "in sealed memory" : "inline"))")
        }
        let same = bench_current_cpu() == bench_responder_cell_cpu(cell)
        if run!.recorder.add(now &- sentAt, sameCPU: same, now: now) {
            sendNext(to: responder)
        } else {
            finished.signal()
        }
    }

    private func hello(_ message: MessagePort.Message) {
        guard message.msgid == RunLoopKitPeer.helloMsgid, message.components.isEmpty,
              let responderPort = message.replyPort, responderPort.isProxy else {
            fail("RunLoopKit xlarge: the responder's first message was not its hello with a reply port")
        }
        responder = responderPort
        // On this loop, the proxy notices the responder hanging up (its process died).
        responderPort.setInvalidationHandler { _ in fail("RunLoopKit xlarge: the responder process hung up during the run") }
        ThreadRunLoop.current.add(responderPort, forMode: .default)
        connected.signal()
    }

    /// Initiator's thread: makes or marks the next message and sends it; the round starts here.
    private func sendNext(to responder: MessagePort) {
        sent += 1
        let seq = sent
        let bytes = run!.bytes
        let first = bench_xlarge_first_byte(seq)
        let last = bench_xlarge_last_byte(seq)
        run!.sentAt = bench_now_ns()
        let payload: Data
        switch run!.payload {
        case .sealedMemory:
            do {
                payload = try SealedMemory.data(count: bytes) { memory in
                    memory[0] = first
                    memory[bytes - 1] = last
                }
            } catch {
                fail("RunLoopKit xlarge: SealedMemory.data(count: \(bytes)): \(error)")
            }
        case .copied:
            let unmoved = block!.withUnsafeMutableBytes { memory in
                memory[0] = first
                memory[bytes - 1] = last
                return UnsafeRawPointer(memory.baseAddress) == blockAddress
            }
            guard unmoved else { fail("RunLoopKit xlarge: the ordinary Data was copied on write by the benchmark") }
            payload = block!
        }
        do {
            try responder.send(msgid: UInt32(truncatingIfNeeded: seq), components: [.data(payload)],
                               timeout: RunLoopKitPeer.sendTimeout)
        } catch {
            fail("RunLoopKit xlarge: send of \(bytes) bytes failed: \(error)")
        }
    }
}

/// A C peer of the xlarge workload (`bench_xlarge_peer`), kept for a whole row.
final class CLargePeer {
    private let peer: OpaquePointer

    init(_ open: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> OpaquePointer?) {
        var failure: UnsafePointer<CChar>?
        guard let peer = open(&failure) else {
            fail(failure.map { String(cString: $0) } ?? "xlarge: a C peer could not start")
        }
        self.peer = peer
    }

    func measure(bytes: Int, _ plan: LatencyPlan) -> LatencyMeasurement {
        CPeers.latency(plan) { cPlan, result in bench_xlarge_measure(peer, bytes, cPlan, result) }
    }

    /// Hangs up and reaps the responder; fails the run if it failed or missed a message.
    func close() {
        if let failure = bench_xlarge_close(peer) { fail(String(cString: failure)) }
    }
}

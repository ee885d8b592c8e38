import PackageTestSupport
import Synchronization
import Testing
import RunLoopKit
#if canImport(Glibc)
import Glibc
#endif

/// In-process signal tests. The test runner's other threads do not block SIGUSR1/SIGUSR2,
/// so a process-directed signal could land on any of them and kill the runner; these tests
/// therefore send thread-directed signals with `pthread_kill` to the loop's own thread,
/// which blocks them (SignalSource.init blocks in the calling thread). Process-directed
/// delivery (kill(2) of the whole process, with every thread blocking the signal) is tested
/// through the example daemon's SIGTERM and SIGHUP in ExampleDaemonTests.
@Suite("SignalSource")
struct SignalSourceTests {
    @Test("a signal sent to the loop's thread is delivered once, on that thread")
    func deliveredOnceOnLoopThread() async throws {
        struct Delivery: Sendable, Equatable { var signal: Int32; var onLoopThread: Bool }
        let loopThread = Locked<pthread_t?>(nil)
        let deliveries = Locked<[Delivery]>([])
        let firstSeen = AsyncStream<Void>.makeStream()
        let started = AsyncStream<Void>.makeStream()

        let result = Task {
            await onNewThread("signal-loop") { () -> String? in
                let loop = ThreadRunLoop.current
                let source: SignalSource
                do {
                    source = try SignalSource(signals: [SIGUSR1, SIGUSR2]) { _, signo in
                        deliveries.withLock {
                            $0.append(Delivery(signal: signo, onLoopThread: ThreadRunLoop.current === loop))
                        }
                        if signo == SIGUSR1 { firstSeen.continuation.yield() }
                        if signo == SIGUSR2 { loop.stop() }
                    }
                } catch {
                    started.continuation.finish()
                    return "SignalSource: \(error)"
                }
                guard SignalSource.isBlockedInCurrentThread(SIGUSR1) else { return "SIGUSR1 not blocked by init" }
                source.add(to: loop, forMode: .default)
                loopThread.withLock { $0 = pthread_self() }
                started.continuation.yield()
                let outcome = loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
                // Anything still queued (a duplicate) would be read by one more pass.
                loop.run(mode: .default, for: .zero, returnAfterSourceHandled: false)
                source.invalidate()
                return outcome == .stopped ? nil : "loop returned \(outcome), not .stopped"
            }
        }

        var iterator = started.stream.makeAsyncIterator()
        _ = await iterator.next()
        let thread = try #require(loopThread.withLock { $0 }, "the loop thread failed to start")
        #expect(pthread_kill(thread, SIGUSR1) == 0)
        var seen = firstSeen.stream.makeAsyncIterator()
        _ = await seen.next()
        // The sentinel: SIGUSR2 stops the loop; a duplicate SIGUSR1 would show before or after it.
        #expect(pthread_kill(thread, SIGUSR2) == 0)
        let failure = await result.value
        #expect(failure == nil, "\(failure ?? "")")
        #expect(deliveries.withLock { $0 } == [Delivery(signal: SIGUSR1, onLoopThread: true),
                                               Delivery(signal: SIGUSR2, onLoopThread: true)])
    }

    @Test("signals are not delivered while the loop runs a mode without the source")
    func onlyInItsMode() async throws {
        let outcome: [String] = await onNewThread("signal-mode-loop") {
            var notes: [String] = []
            let loop = ThreadRunLoop.current
            let delivered = Locked<[Int32]>([])
            guard let source = try? SignalSource(signals: [SIGUSR2], handler: { _, signo in
                delivered.withLock { $0.append(signo) }
                loop.stop()
            }) else { return ["SignalSource init failed"] }
            source.add(to: loop, forMode: "signals")
            pthread_kill(pthread_self(), SIGUSR2)   // blocked: stays pending for the signalfd
            let keepAlive = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in }
            loop.add(keepAlive, forMode: "other")
            let other = loop.run(mode: "other", for: .milliseconds(100), returnAfterSourceHandled: false)
            if other != .timedOut { notes.append("other mode returned \(other)") }
            if !delivered.withLock({ $0.isEmpty }) { notes.append("delivered in the other mode") }
            let inMode = loop.run(mode: "signals", for: .seconds(10), returnAfterSourceHandled: false)
            if inMode != .stopped { notes.append("signals mode returned \(inMode)") }
            if delivered.withLock({ $0 }) != [SIGUSR2] { notes.append("delivered \(delivered.withLock { $0 })") }
            keepAlive.invalidate()
            source.invalidate()
            return notes
        }
        #expect(outcome.isEmpty, "\(outcome)")
    }

    @Test("SIGKILL, SIGSTOP and out-of-range numbers are refused")
    func invalidSignals() {
        #expect(throws: SignalSource.Failure.invalidSignal(SIGKILL)) {
            try SignalSource(signals: [SIGUSR1, SIGKILL]) { _, _ in }
        }
        #expect(throws: SignalSource.Failure.invalidSignal(SIGSTOP)) {
            try SignalSource.blockInCurrentThread([SIGSTOP])
        }
        #expect(throws: SignalSource.Failure.invalidSignal(4096)) {
            try SignalSource(signals: [4096]) { _, _ in }
        }
    }

    @Test("blockInCurrentThread blocks in the calling thread only, and is inherited by threads it creates")
    func blockingIsPerThread() async {
        let notes: [String] = await onNewThread("mask-parent") {
            var notes: [String] = []
            do { try SignalSource.blockInCurrentThread([SIGUSR2]) } catch { return ["block: \(error)"] }
            if !SignalSource.isBlockedInCurrentThread(SIGUSR2) { notes.append("not blocked after block") }
            // A thread created now inherits the mask (pthread_create copies it).
            var child = pthread_t()
            var inherited: Bool = false
            withUnsafeMutablePointer(to: &inherited) { flag in
                pthread_create(&child, nil, { raw in
                    raw!.assumingMemoryBound(to: Bool.self).pointee = SignalSource.isBlockedInCurrentThread(SIGUSR2)
                    return nil
                }, flag)
                pthread_join(child, nil)
            }
            if !inherited { notes.append("child thread did not inherit the mask") }
            do { try SignalSource.unblockInCurrentThread([SIGUSR2]) } catch { notes.append("unblock: \(error)") }
            if SignalSource.isBlockedInCurrentThread(SIGUSR2) { notes.append("still blocked after unblock") }
            return notes
        }
        #expect(notes.isEmpty, "\(notes)")
    }
}

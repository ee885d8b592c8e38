// Guarantees §3.11: a waiting loop uses no CPU — no polling, no spinning, no periodic wake-ups.
// The CPU bound below is a resource bound on the waiting thread itself (RUSAGE_THREAD),
// not a timing threshold: a loop that sleeps in the kernel uses ~0 ms per second.

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§3.11 idle cost", .serialized)
struct IdleCostTests {

    @Test("§3.11 a thread blocked in run for one second uses under 50 ms of CPU time")
    func blockedLoopUsesNoCPU() throws {
        let r = try #require(onLoopThread { loop -> (RLResult, Duration, Duration) in
            loop.add(keepAliveSource(), forMode: .default)
            let cpuBefore = threadCPUTime()
            let start = ContinuousClock.now
            let result = loop.run(mode: .default, for: .seconds(1), returnAfterSourceHandled: false)
            let wall = ContinuousClock.now - start
            return (result, threadCPUTime() - cpuBefore, wall)
        })
        #expect(r.0 == .timedOut)
        #expect(r.2 >= .seconds(1), "the run returned before its timeout")
        #expect(r.1 < .milliseconds(50), "a waiting loop used \(r.1) of CPU in \(r.2)")
    }

    @Test("§3.11 a loop with a far-future timer, a port and an fd source also sleeps without CPU or wake-ups")
    func loopWithItemsSleepsWithoutWakeUps() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let r = try #require(onLoopThread { loop -> (RLResult, Duration, Int) in
            let events = Recorder<String>()
            let port = try! MessagePort()
            port.setHandler { _ in }
            let fdSource = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in }
            loop.add(farFutureTimer(), forMode: .default)
            loop.add(port, forMode: .default)
            loop.add(fdSource, forMode: .default)
            loop.add(recordingObserver(events, activities: .afterWaiting), forMode: .default)
            let cpuBefore = threadCPUTime()
            let result = loop.run(mode: .default, for: .seconds(1), returnAfterSourceHandled: false)
            let cpu = threadCPUTime() - cpuBefore
            fdSource.invalidate()
            port.invalidate()
            return (result, cpu, events.count)
        })
        #expect(r.0 == .timedOut)
        #expect(r.1 < .milliseconds(50), "a waiting loop used \(r.1) of CPU in one second")
        // At most the wake-up for the run's own timeout.
        #expect(r.2 <= 1, "\(r.2) wake-ups in one idle second")
    }

    @Test("§3.11 isWaiting is true while blocked in the kernel and false otherwise")
    func isWaitingTrueWhileBlocked() throws {
        let seenInCallout = Recorder<Bool>()
        let lt = LoopThread { loop -> RLResult in
            loop.add(keepAliveSource(), forMode: .default)
            loop.add(RunLoopObserver(activities: [.entry, .beforeWaiting, .afterWaiting, .exit]) { _, _ in
                seenInCallout.append(loop.isWaiting)
            }, forMode: .default)
            return loop.run(mode: .default, for: longRun, returnAfterSourceHandled: false)
        }
        #expect(lt.waitUntilSleeping(), "isWaiting never became true")
        #expect(lt.loop.currentMode == .default)
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        #expect(lt.loop.isWaiting == false)
        #expect(!seenInCallout.values.isEmpty)
        #expect(seenInCallout.values.allSatisfy { $0 == false }, "isWaiting was true inside a callout")
    }
}

// FileDescriptorSource (Source1 over any fd) with the handling rules of Guarantees §3.2/§3.3.

import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("§2 FileDescriptorSource")
struct FileDescriptorSourceTests {

    @Test("§2 a readable fd calls the handler on the loop thread with .readable and the source itself")
    func readableEventOnLoopThread() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let seen = Recorder<(Bool, Bool, Bool)>()  // (readable, same source, on loop thread)
        let r = try #require(onLoopThread { loop -> RLResult in
            let me = pthread_self()
            let ref = WeakRef<FileDescriptorSource>()
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { s, ev in
                drainEventFD(fd)
                seen.append((ev.contains(.readable), s === ref.object, isCurrentThread(me)))
            }
            ref.object = source
            loop.add(source, forMode: .default)
            writeEventFD(fd)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            source.invalidate()
            return result
        })
        #expect(r == .handledSource)
        #expect(seen.count == 1)
        #expect(seen.values.first.map { $0.0 && $0.1 && $0.2 } == true, "\(seen.values)")
    }

    @Test("§2 a writable socket calls the handler with .writable")
    func writableEvent() throws {
        var fds: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        let fd = fds[0]
        let r = try #require(onLoopThread { loop -> (RLResult, Bool) in
            let sawWritable = Flag()
            let source = FileDescriptorSource(fileDescriptor: fd, events: .writable) { s, ev in
                if ev.contains(.writable) { sawWritable.set() }
                s.invalidate()  // a writable socket stays writable: stop after the first event
            }
            loop.add(source, forMode: .default)
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            return (result, sawWritable.isSet)
        })
        #expect(r.0 == .handledSource)
        #expect(r.1)
    }

    @Test("§2 invalidate() does not close the descriptor; the source is invalid and leaves its mode")
    func invalidateDoesNotCloseDescriptor() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let r = try #require(onLoopThread { loop -> (Bool, Bool, RLResult) in
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in }
            let validBefore = source.isValid
            loop.add(source, forMode: "fd")
            source.invalidate()
            let result = loop.run(mode: "fd", for: longRun, returnAfterSourceHandled: false)
            return (validBefore, source.isValid, result)
        })
        #expect(r.0 == true)
        #expect(r.1 == false)
        #expect(r.2 == .finished)
        #expect(isOpenDescriptor(fd), "invalidate() closed the descriptor")
        writeEventFD(fd)
        #expect(drainEventFD(fd) == 1)
    }

    @Test("§2/§3.2 each write wakes the sleeping loop once; a drained fd does not keep the loop awake")
    func eachWriteIsHandledAndDrainedFdSleeps() throws {
        let fd = makeEventFD()
        defer { close(fd) }
        let handled = Counter()
        let wakeUps = Recorder<String>()
        let lt = LoopThread { loop -> RLResult in
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
                drainEventFD(fd)
                handled.increment()
            }
            loop.add(source, forMode: .default)
            loop.add(recordingObserver(wakeUps, activities: .afterWaiting), forMode: .default)
            let r = loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
            source.invalidate()
            return r
        }
        for i in 1...10 {
            #expect(lt.waitUntilSleeping())
            writeEventFD(fd)
            guard waitUntil({ handled.current == i }) else {
                Issue.record("write \(i) was not handled")
                break
            }
        }
        #expect(lt.waitUntilSleeping())
        let wakesBefore = wakeUps.count
        settle()  // a loop spinning on the drained fd would keep waking up
        let wakesAfter = wakeUps.count
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        #expect(handled.current == 10)
        #expect(wakesAfter == wakesBefore, "the loop kept waking up on a drained fd")
        #expect(wakesAfter >= 10 && wakesAfter <= 11, "wake-ups: \(wakesAfter) for 10 writes")
    }
}

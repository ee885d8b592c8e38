// FileDescriptorSource.events: what a scheduled source waits for changes in place (a
// connection's source asks for .writable only while output is queued, and for nothing while it
// must neither read nor write), without removing and re-adding it.

import Glibc
import RunLoopKit
import Synchronization
import Testing

/// A connected AF_UNIX stream pair (both ends close-on-exec), closed by the caller.
private func streamPair() -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0)
    return (fds[0], fds[1])
}

private func sendByte(_ fd: Int32) {
    var byte: UInt8 = 1
    precondition(write(fd, &byte, 1) == 1)
}

private func name(_ events: FileDescriptorSource.Events) -> String {
    "\(events.contains(.readable) ? "r" : "")\(events.contains(.writable) ? "w" : "")"
}

@Suite("FileDescriptorSource.events")
struct FileDescriptorSourceEventsTests {

    @Test("changing a scheduled source's events takes effect without re-adding it: readable, writable, readable again")
    func eventsChangeInPlace() throws {
        let (fd, peer) = streamPair()
        defer { close(fd); close(peer) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, ready in
                seen.append(name(ready))
            }
            loop.add(source, forMode: .default)
            sendByte(peer)
            seen.append("run \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            // The byte is still unread, so the descriptor is readable and writable: asked for
            // .writable only, the source is told only that.
            source.events = .writable
            seen.append("events \(name(source.events))")
            seen.append("run \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            source.events = .readable
            seen.append("run \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            var byte: UInt8 = 0
            _ = read(fd, &byte, 1)
            // Nothing to read and no interest in writing: the registration no longer asks for
            // .writable (which a socket always is), so the run sleeps until its deadline.
            seen.append("run \(loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: true))")
            source.invalidate()
            return seen.values
        })
        #expect(seen == ["r", "run handledSource", "events w", "w", "run handledSource", "r", "run handledSource",
                         "run timedOut"])
    }

    @Test("a readiness the source stopped asking for earlier in the same pass is not reported")
    func changeAppliesToThePassUnderWay() throws {
        let (fd, peer) = streamPair()
        defer { close(fd); close(peer) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let later = Ref<FileDescriptorSource>()
            // Both sources share the descriptor, so one epoll event reaches both in one pass, in
            // ascending order: the first narrows the second after the event was collected.
            let first = FileDescriptorSource(fileDescriptor: fd, events: .readable, order: 0) { _, ready in
                seen.append("first \(name(ready))")
                later.value?.events = .writable
            }
            let second = FileDescriptorSource(fileDescriptor: fd, events: [.readable, .writable], order: 1) { _, ready in
                seen.append("second \(name(ready))")
            }
            later.value = second
            loop.add(first, forMode: .default)
            loop.add(second, forMode: .default)
            sendByte(peer)
            _ = loop.run(mode: .default, for: .zero, returnAfterSourceHandled: false)
            first.invalidate()
            second.invalidate()
            return seen.values
        })
        #expect(seen == ["first r", "second w"])
    }

    @Test("a loop asleep in epoll sees events set from another thread, without a wake-up")
    func changeReachesASleepingLoop() throws {
        let (fd, peer) = streamPair()
        defer { close(fd); close(peer) }
        let source = Ref<FileDescriptorSource>()
        let thread = LoopThread { loop -> (RLResult, [String]) in
            let seen = Recorder<String>()
            let watcher = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, ready in
                seen.append(name(ready))
            }
            loop.add(watcher, forMode: .default)
            source.value = watcher
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            watcher.invalidate()
            return (result, seen.values)
        }
        #expect(thread.waitUntilSleeping(in: .default))
        try #require(waitUntil { source.value != nil })
        // A socket with room to write is writable at once: the sleeping loop must notice.
        source.value?.events = .writable
        let (result, seen) = try #require(thread.join())
        #expect(result == .handledSource)
        #expect(seen == ["w"])
    }

    @Test("no events pauses a source: the loop sleeps through readiness and hang-up, the mode stays alive, and both are reported once it asks again")
    func noEventsPausesTheSource() throws {
        let (fd, peer) = streamPair()
        defer { close(fd) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let passes = Counter()
            loop.add(RunLoopObserver(activities: .beforeTimers) { _, _ in passes.increment() }, forMode: .default)
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, ready in
                seen.append(name(ready))
            }
            loop.add(source, forMode: .default)
            source.events = []
            sendByte(peer)
            close(peer)   // readable and hung up, neither reported while paused
            let result = loop.run(mode: .default, for: .milliseconds(300), returnAfterSourceHandled: true)
            seen.append("paused \(result), passes \(passes.current <= 3 ? "few" : "\(passes.current)")")
            source.events = .readable
            seen.append("resumed \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            source.invalidate()
            return seen.values
        })
        #expect(seen == ["paused timedOut, passes few", "r", "resumed handledSource"])
    }

    @Test("a paused source over a descriptor epoll refuses (/dev/null) lets the loop sleep; resumed, it is ready at once")
    func pausedUnpollableSourceSleeps() throws {
        let fd = open("/dev/null", O_RDONLY | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let passes = Counter()
            loop.add(RunLoopObserver(activities: .beforeTimers) { _, _ in passes.increment() }, forMode: .default)
            let source = FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, ready in
                seen.append(name(ready))
            }
            loop.add(source, forMode: .default)
            seen.append("ready \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            source.events = []
            let before = passes.current
            let result = loop.run(mode: .default, for: .milliseconds(300), returnAfterSourceHandled: true)
            let paused = passes.current - before
            seen.append("paused \(result), passes \(paused <= 3 ? "few" : "\(paused)")")
            source.events = .readable
            seen.append("resumed \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            source.invalidate()
            return seen.values
        })
        #expect(seen == ["r", "ready handledSource", "paused timedOut, passes few", "r", "resumed handledSource"])
    }

    @Test("a source added while paused watches nothing until it asks for events")
    func addedWhilePaused() throws {
        let (fd, peer) = streamPair()
        defer { close(fd); close(peer) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let source = FileDescriptorSource(fileDescriptor: fd, events: .writable) { _, ready in
                seen.append(name(ready))
            }
            source.events = []
            loop.add(source, forMode: .default)
            seen.append("paused \(loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: true))")
            source.events = .writable
            seen.append("resumed \(loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true))")
            source.invalidate()
            return seen.values
        })
        #expect(seen == ["paused timedOut", "w", "resumed handledSource"])
    }

    @Test("one of several sources on a descriptor changing its events widens and narrows the shared registration; the others keep theirs")
    func sharedRegistrationFollowsTheUnion() throws {
        let (fd, peer) = streamPair()
        defer { close(fd); close(peer) }
        let seen = try #require(onLoopThread { loop -> [String] in
            let seen = Recorder<String>()
            let reader = FileDescriptorSource(fileDescriptor: fd, events: .readable, order: 0) { _, ready in
                seen.append("reader \(name(ready))")
            }
            let other = FileDescriptorSource(fileDescriptor: fd, events: .readable, order: 1) { _, ready in
                seen.append("other \(name(ready))")
            }
            loop.add(reader, forMode: .default)
            loop.add(other, forMode: .default)
            loop.add(other, forMode: "second")
            other.events = .writable   // widens the registration in both modes
            seen.append("default \(loop.run(mode: .default, for: .zero, returnAfterSourceHandled: false))")
            seen.append("second \(loop.run(mode: "second", for: longRun, returnAfterSourceHandled: true))")
            other.events = .readable   // narrows it again: nothing is ready now
            seen.append("narrowed \(loop.run(mode: .default, for: .milliseconds(200), returnAfterSourceHandled: true))")
            sendByte(peer)
            seen.append("data \(loop.run(mode: .default, for: .zero, returnAfterSourceHandled: false))")
            reader.invalidate()
            other.invalidate()
            return seen.values
        })
        #expect(seen == ["other w", "default timedOut", "other w", "second handledSource", "narrowed timedOut",
                         "reader r", "other r", "data timedOut"])
    }
}

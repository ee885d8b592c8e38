#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit
import Synchronization
import Testing

@Suite("Port invalidation notice, loop description, items added to a sleeping loop")
struct PortInvalidationAndDescriptionTests {
    @Test("§3.9/§3.15 a Source0 and a timer added from another thread to a loop already asleep are serviced")
    func itemsAddedToSleepingLoopAreServiced() throws {
        let worker = ResidentThread(name: "late-items")
        defer { worker.stop() }
        let deadline = ContinuousClock.now + .seconds(10)
        while !worker.runLoop.isWaiting && ContinuousClock.now < deadline { usleep(1_000) }
        let performed = Atomic<Bool>(false)
        let fired = Atomic<Bool>(false)
        let source = RunLoopSource { performed.store(true, ordering: .relaxed) }
        let timer = RunLoopTimer(interval: .milliseconds(1), repeats: false) { _ in fired.store(true, ordering: .relaxed) }
        worker.runLoop.add(source, forMode: .default)
        worker.runLoop.add(timer, forMode: .default)
        source.signal()
        worker.runLoop.wakeUp()
        while !(performed.load(ordering: .relaxed) && fired.load(ordering: .relaxed)) && ContinuousClock.now < deadline {
            usleep(1_000)
        }
        let didPerform = performed.load(ordering: .relaxed)
        let didFire = fired.load(ordering: .relaxed)
        #expect(didPerform)
        #expect(didFire)
        source.invalidate()
    }

    @Test("invalidate() runs the invalidation handler once, after discarding and counting queued messages")
    func invalidationHandlerRunsOnceWithDiscardedCount() throws {
        let port = try MessagePort(queueLimit: 8)
        for msgid in 0..<5 { try port.send(msgid: UInt32(msgid), timeout: .seconds(1)) }
        let calls = Atomic<Int>(0)
        let seenDiscarded = Atomic<Int>(-1)
        port.setInvalidationHandler { invalidated in
            calls.add(1, ordering: .relaxed)
            seenDiscarded.store(invalidated.discardedCount, ordering: .relaxed)
        }
        port.invalidate()
        port.invalidate()
        let callCount = calls.load(ordering: .relaxed)
        let discarded = seenDiscarded.load(ordering: .relaxed)
        #expect(callCount == 1)
        #expect(discarded == 5)
        #expect(port.queuedCount == 0)
        #expect(throws: PortError.invalidPort) { try port.send(msgid: 9, timeout: .seconds(1)) }
    }

    @Test("invalidate() lets go of the handler (as CFMessagePortInvalidate releases its context): a handler that captures its own port no longer keeps it alive")
    func invalidationReleasesTheHandler() throws {
        let freed = try invalidatePortWhoseHandlerCapturesIt()
        #expect(freed.object == nil, "the port outlived its last reference: its handler still held it")
    }

    @Test("an invalidation handler set on an already invalid port runs at once")
    func invalidationHandlerOnInvalidPortRunsAtOnce() throws {
        let port = try MessagePort()
        port.invalidate()
        let ran = Atomic<Bool>(false)
        port.setInvalidationHandler { _ in ran.store(true, ordering: .relaxed) }
        let didRun = ran.load(ordering: .relaxed)
        #expect(didRun)
    }

    @Test("debugDescription lists common modes and, per mode, sources, ports, fd sources, timers and observers")
    func debugDescriptionListsModesAndItems() throws {
        let loop = ThreadRunLoop.current
        let custom: ThreadRunLoop.Mode = "rlk.description"
        let source = RunLoopSource(order: 7) {}
        source.signal()
        let timer = RunLoopTimer(fireAt: .now + .seconds(3600), interval: .seconds(5), tolerance: .seconds(1)) { _ in }
        let observer = RunLoopObserver(activities: [.beforeWaiting], order: 3) { _, _ in }
        let port = try MessagePort(queueLimit: 16)
        loop.add(source, forMode: custom)
        loop.add(timer, forMode: custom)
        loop.add(observer, forMode: custom)
        loop.add(port, forMode: custom)
        defer {
            source.invalidate()
            timer.invalidate()
            observer.invalidate()
            port.invalidate()
        }
        let text = loop.debugDescription
        #expect(text.contains("current mode = (not running)"))
        #expect(text.contains("common modes = [\(ThreadRunLoop.Mode.default.rawValue)]"))
        #expect(text.contains("\(custom.rawValue) = {"))
        #expect(text.contains("RunLoopSource(order: 7, signalled: true"))
        #expect(text.contains("interval: 5.0 seconds, tolerance: 1.0 seconds"))
        #expect(text.contains("RunLoopObserver(activities: [beforeWaiting], order: 3"))
        #expect(text.contains("queued: 0/16"))
    }
}

/// Makes a port whose handler captures it (a cycle until invalidation), invalidates it, and
/// returns a weak reference to it. A function of its own, so that no local outlives it.
private func invalidatePortWhoseHandlerCapturesIt() throws -> WeakRef<MessagePort> {
    let port = try MessagePort()
    port.setHandler { _ in _ = port.queuedCount }
    let weak = WeakRef(port)
    port.invalidate()
    return weak
}

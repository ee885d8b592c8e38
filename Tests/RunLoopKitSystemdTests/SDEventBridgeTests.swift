import CSystemd
import PackageTestSupport
import Synchronization
import Testing
import RunLoopKit
import RunLoopKitSystemd
#if canImport(Glibc)
import Glibc
#endif

/// What the sd-event callbacks saw: their names, in order, and whether each ran on the
/// loop's thread.
private final class Recorder: Sendable {
    let events = Locked<[String]>([])
    let offThread = Locked<[String]>([])
    let loop: ThreadRunLoop
    init(loop: ThreadRunLoop) { self.loop = loop }

    func record(_ name: String) {
        events.withLock { $0.append(name) }
        if ThreadRunLoop.current !== loop { offThread.withLock { $0.append(name) } }
    }
    var snapshot: [String] { events.withLock { $0 } }

    var pointer: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }
    static func from(_ raw: UnsafeMutableRawPointer?) -> Recorder {
        Unmanaged<Recorder>.fromOpaque(raw!).takeUnretainedValue()
    }
}

/// Set by an sd-event destroy callback (a C function pointer, so it cannot capture).
private final class FreedFlag: Sendable {
    private let value = Locked(false)
    func set() { value.withLock { $0 = true } }
    func get() -> Bool { value.withLock { $0 } }
}

/// Test scenarios run on a fresh thread with its own ThreadRunLoop and sd_event.
@Suite("SDEventBridge")
struct SDEventBridgeTests {
    fileprivate struct Outcome: Sendable {
        var whileOtherMode: [String] = []
        var otherResult: ThreadRunLoop.RunResult?
        var bridgedResult: ThreadRunLoop.RunResult?
        var events: [String] = []
        var offThread: [String] = []
        var completion: SDEventBridge.Completion?
        var bridgeValidAfter = true
        var setupError: String?
    }

    @Test("timer and io sources fire in the bridged mode, and not while another mode runs")
    func firesOnlyInBridgedMode() async throws {
        let outcome = await onEventLoopThread { loop, event, outcome in
            let recorder = Recorder(loop: loop)

            // An io source on a pipe that is readable from the start.
            var pipeFDs: [Int32] = [-1, -1]
            guard pipe(&pipeFDs) == 0 else { outcome.setupError = "pipe: errno \(errno)"; return }
            defer { close(pipeFDs[0]); close(pipeFDs[1]) }
            var byte: UInt8 = 42
            _ = write(pipeFDs[1], &byte, 1)
            var ioSource: OpaquePointer?
            sd_event_add_io(event, &ioSource, pipeFDs[0], EPOLLIN.rawValue, { _, fd, _, userdata in
                var byte: UInt8 = 0
                _ = read(fd, &byte, 1)
                Recorder.from(userdata).record("io")
                return 0
            }, recorder.pointer)
            // A timer that is already due.
            var dueTimer: OpaquePointer?
            sd_event_add_time_relative(event, &dueTimer, CLOCK_MONOTONIC, 0, 1, { _, _, userdata in
                Recorder.from(userdata).record("due-timer")
                return 0
            }, recorder.pointer)
            defer { sd_event_source_unref(ioSource); sd_event_source_unref(dueTimer) }

            let bridge: SDEventBridge
            do { bridge = try SDEventBridge(event: event) } catch {
                outcome.setupError = "SDEventBridge: \(error)"
                return
            }
            let bridged = ThreadRunLoop.Mode("sd-event")
            let other = ThreadRunLoop.Mode("other")
            bridge.add(to: loop, forMode: bridged)

            // Another mode, kept alive by a far-off timer: the sd-event descriptor is readable
            // and the timer due, yet nothing may be dispatched while this mode runs.
            let keepAlive = RunLoopTimer(fireAt: .now + .seconds(3600)) { _ in }
            loop.add(keepAlive, forMode: other)
            outcome.otherResult = loop.run(mode: other, for: .milliseconds(200), returnAfterSourceHandled: false)
            outcome.whileOtherMode = recorder.snapshot
            keepAlive.invalidate()

            // A timer that falls due only after the loop went to sleep: it can only be seen
            // through sd-event's timerfd, armed by sd_event_prepare before the sleep.
            var laterTimer: OpaquePointer?
            sd_event_add_time_relative(event, &laterTimer, CLOCK_MONOTONIC, 50_000, 1, { _, _, userdata in
                let recorder = Recorder.from(userdata)
                recorder.record("later-timer")
                recorder.loop.stop()
                return 0
            }, recorder.pointer)
            defer { sd_event_source_unref(laterTimer) }

            outcome.bridgedResult = loop.run(mode: bridged, for: .seconds(10), returnAfterSourceHandled: false)
            outcome.events = recorder.snapshot
            outcome.offThread = recorder.offThread.withLock { $0 }
            bridge.invalidate()
        }
        #expect(outcome.setupError == nil, "\(outcome.setupError ?? "")")
        #expect(outcome.otherResult == .timedOut)
        #expect(outcome.whileOtherMode.isEmpty, "sd-event dispatched in a mode without the bridge: \(outcome.whileOtherMode)")
        #expect(outcome.bridgedResult == .stopped, "the later timer never fired (result \(String(describing: outcome.bridgedResult)))")
        #expect(outcome.events.sorted() == ["due-timer", "io", "later-timer"], "each source fires once: \(outcome.events)")
        #expect(outcome.events.last == "later-timer")
        #expect(outcome.offThread.isEmpty, "callbacks off the loop's thread: \(outcome.offThread)")
    }

    @Test("a lone sd-event timer wakes the sleeping loop (no descriptor activity, no polling)")
    func loneTimerWakesLoop() async throws {
        let outcome = await onEventLoopThread { loop, event, outcome in
            let recorder = Recorder(loop: loop)
            let bridge: SDEventBridge
            do { bridge = try SDEventBridge(event: event) } catch {
                outcome.setupError = "SDEventBridge: \(error)"
                return
            }
            bridge.add(to: loop, forMode: .default)
            // Only sd_event_prepare (run by the bridge's .beforeWaiting observer) arms this
            // timer's timerfd; without it the loop would sleep until the 10 s run limit.
            var timer: OpaquePointer?
            sd_event_add_time_relative(event, &timer, CLOCK_MONOTONIC, 30_000, 1, { _, _, userdata in
                let recorder = Recorder.from(userdata)
                recorder.record("timer")
                recorder.loop.stop()
                return 0
            }, recorder.pointer)
            defer { sd_event_source_unref(timer) }
            outcome.bridgedResult = loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
            outcome.events = recorder.snapshot
            outcome.offThread = recorder.offThread.withLock { $0 }
            bridge.invalidate()
        }
        #expect(outcome.setupError == nil, "\(outcome.setupError ?? "")")
        #expect(outcome.bridgedResult == .stopped, "\(String(describing: outcome.bridgedResult))")
        #expect(outcome.events == ["timer"])
        #expect(outcome.offThread.isEmpty)
    }

    @Test("a dropped bridge releases its sd_event reference (the event loop is freed)")
    func releasesEvent() async throws {
        let outcome: (freed: Bool, error: String?) = await onNewThread("sd-event-loop") {
            let loop = ThreadRunLoop.current
            let flag = FreedFlag()
            var event: OpaquePointer?
            guard sd_event_new(&event) >= 0, let event else { return (false, "sd_event_new failed") }
            // A floating source lives as long as its event loop; its destroy callback tells
            // us when the last sd_event reference is gone.
            var source: OpaquePointer?
            sd_event_add_time_relative(event, &source, CLOCK_MONOTONIC, 1_000, 1, { _, _, _ in 0 }, nil)
            sd_event_source_set_floating(source, 1)
            sd_event_source_set_userdata(source, Unmanaged.passUnretained(flag).toOpaque())
            sd_event_source_set_destroy_callback(source) { userdata in
                Unmanaged<FreedFlag>.fromOpaque(userdata!).takeUnretainedValue().set()
            }
            sd_event_source_unref(source)   // the event loop now holds the only reference
            do {
                let bridge = try SDEventBridge(event: event)
                bridge.add(to: loop, forMode: .default)
                loop.run(mode: .default, for: .milliseconds(20), returnAfterSourceHandled: false)
                bridge.invalidate()
            } catch {
                return (false, "SDEventBridge: \(error)")
            }
            // The bridge is gone; the loop polls once more to let go of its items.
            loop.run(mode: .default, for: .zero, returnAfterSourceHandled: false)
            if flag.get() { return (false, "the sd_event was freed while this test still held a reference") }
            sd_event_unref(event)   // ours is the last reference unless the bridge leaked one
            return (flag.get(), nil)
        }
        #expect(outcome.error == nil, "\(outcome.error ?? "")")
        #expect(outcome.freed, "the sd_event outlived its bridge: a reference was leaked")
    }

    @Test("sd_event_exit ends the bridge: completion with the exit code, bridge invalid")
    func exitCompletes() async throws {
        let outcome = await onEventLoopThread { loop, event, outcome in
            var timer: OpaquePointer?
            sd_event_add_time_relative(event, &timer, CLOCK_MONOTONIC, 20_000, 1, { source, _, _ in
                sd_event_exit(sd_event_source_get_event(source), 7)
                return 0
            }, nil)
            defer { sd_event_source_unref(timer) }

            let completion = Locked<SDEventBridge.Completion?>(nil)
            let bridge: SDEventBridge
            do {
                bridge = try SDEventBridge(event: event) { result in
                    completion.withLock { $0 = result }
                    loop.stop()
                }
            } catch {
                outcome.setupError = "SDEventBridge: \(error)"
                return
            }
            bridge.add(to: loop, forMode: .default)
            outcome.bridgedResult = loop.run(mode: .default, for: .seconds(10), returnAfterSourceHandled: false)
            outcome.completion = completion.withLock { $0 }
            outcome.bridgeValidAfter = bridge.isValid
        }
        #expect(outcome.setupError == nil, "\(outcome.setupError ?? "")")
        #expect(outcome.completion == .exited(code: 7))
        #expect(!outcome.bridgeValidAfter)
        #expect(outcome.bridgedResult == .stopped || outcome.bridgedResult == .finished,
                "\(String(describing: outcome.bridgedResult))")
    }
}

/// Runs `body` on a new thread with that thread's loop and a fresh `sd_event` (unreferenced
/// afterwards), collecting what it records; a failed `sd_event_new` is a setup error.
private func onEventLoopThread(
    _ body: @escaping @Sendable (ThreadRunLoop, OpaquePointer, inout SDEventBridgeTests.Outcome) -> Void
) async -> SDEventBridgeTests.Outcome {
    await onNewThread("sd-event-loop") {
        var outcome = SDEventBridgeTests.Outcome()
        var event: OpaquePointer?
        guard sd_event_new(&event) >= 0, let event else {
            outcome.setupError = "sd_event_new failed"
            return outcome
        }
        defer { sd_event_unref(event) }
        body(ThreadRunLoop.current, event, &outcome)
        return outcome
    }
}

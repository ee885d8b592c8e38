// The seed scenarios (the Objective-C run-loop idioms this package exists to carry
// over), re-enacted with RunLoopKit.

import FoundationEssentials
import Glibc
import RunLoopKit
import Synchronization
import Testing

@Suite("Seed scenarios")
struct SeedScenarioTests {

    @Test("seed: AFNetworking's resident network thread — kept alive by a port, given work by perform")
    func afNetworkingResidentThread() throws {
        // + (void)networkRequestThreadEntryPoint:(id)__unused object {
        //     [[NSThread currentThread] setName:@"AFNetworking"];
        //     NSRunLoop *runLoop = [NSRunLoop currentRunLoop];
        //     [runLoop addPort:[NSMachPort port] forMode:NSDefaultRunLoopMode];
        //     [runLoop run];
        // }
        let runReturned = Flag()
        let lt = LoopThread { loop -> Bool in
            let keepAlive = try! MessagePort()
            loop.add(keepAlive, forMode: .default)
            loop.run()
            runReturned.set()
            keepAlive.invalidate()
            return true
        }
        #expect(lt.waitUntilSleeping(in: .default))
        // [self performSelector:@selector(operationDidStart) onThread:networkRequestThread ...]
        let work = Recorder<(Int, Bool)>()
        let thread = lt.threadID
        for i in 0..<10 {
            lt.loop.perform { work.append((i, isCurrentThread(thread))) }
            guard waitUntil({ work.count == i + 1 }) else {
                Issue.record("work item \(i) did not run")
                break
            }
        }
        settle()
        #expect(!runReturned.isSet, "the port did not keep the thread's run() going")
        #expect(work.values.map(\.0) == Array(0..<10))
        #expect(work.values.allSatisfy { $0.1 }, "work ran off the network thread")
        // Unlike NSRunLoop's run, this one can be stopped.
        lt.loop.stop()
        #expect(lt.join() == true)
    }

    @Test("seed testDemo1: run(mode:before:) on the worker returns after one perform")
    func testDemo1RunModeBeforeReturnsAfterOnePerform() throws {
        // while (!self.stopped) {
        //     [[NSRunLoop currentRunLoop] runMode:NSDefaultRunLoopMode beforeDate:[NSDate distantFuture]];
        // }
        let shouldExit = Flag()
        let returns = Counter()
        let lt = LoopThread { loop -> [Bool] in
            let port = try! MessagePort()
            loop.add(port, forMode: .default)
            var results: [Bool] = []
            while !shouldExit.isSet {
                results.append(loop.run(mode: .default, before: .now + .seconds(3600)))
                returns.increment()
            }
            port.invalidate()
            return results
        }
        #expect(lt.waitUntilSleeping(in: .default))
        #expect(returns.current == 0)
        let ran = Flag()
        lt.loop.perform { ran.set() }
        #expect(waitUntil { returns.current == 1 }, "run(mode:before:) did not return after the perform")
        #expect(ran.isSet)
        #expect(lt.waitUntilSleeping(in: .default))
        #expect(returns.current == 1)
        lt.loop.perform { shouldExit.set() }
        let results = try #require(lt.join())
        #expect(results == [true, true])
    }

    @Test("seed testDemo3: msgid 1000 + reply port + Data \"hello\" on the worker; the reply arrives on the sender's loop")
    func testDemo3PortMessageWithReply() throws {
        let workerPort = try MessagePort()
        let seen = Ref<(UInt32, String, Bool, Bool)>()
        let worker = LoopThread { loop -> RLResult in
            let me = pthread_self()
            workerPort.setHandler { m in
                var text = ""
                if case .data(let d)? = m.components.first { text = String(decoding: d, as: UTF8.self) }
                seen.value = (m.msgid, text, m.replyPort != nil, isCurrentThread(me))
                try? m.replyPort?.send(msgid: 1001, components: [.data(Data("world".utf8))], timeout: .seconds(5))
            }
            loop.add(workerPort, forMode: .default)
            return loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
        }
        let reply = try #require(onLoopThread { loop -> (UInt32, String, Bool, RLResult) in
            let me = pthread_self()
            let localPort = try! MessagePort()
            let got = Ref<(UInt32, String, Bool)>()
            localPort.setHandler { m in
                var text = ""
                if case .data(let d)? = m.components.first { text = String(decoding: d, as: UTF8.self) }
                got.value = (m.msgid, text, isCurrentThread(me))
            }
            loop.add(localPort, forMode: .default)
            try! workerPort.send(msgid: 1000, components: [.data(Data("hello".utf8))], from: localPort,
                                 timeout: .seconds(5))
            let result = loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true)
            localPort.invalidate()
            return (got.value?.0 ?? 0, got.value?.1 ?? "", got.value?.2 ?? false, result)
        })
        worker.loop.stop()
        #expect(worker.join() == .stopped)
        #expect(seen.value?.0 == 1000)
        #expect(seen.value?.1 == "hello")
        #expect(seen.value?.2 == true, "no reply port")
        #expect(seen.value?.3 == true, "not delivered on the worker thread")
        #expect(reply.3 == .handledSource)
        #expect(reply.0 == 1001)
        #expect(reply.1 == "world")
        #expect(reply.2, "the reply was not delivered on the sender's loop thread")
        workerPort.invalidate()
    }

    @Test("seed: custom input source — a command buffer filled from one thread, signal() + wakeUp(), performed on the worker")
    func customInputSourceCommandBuffer() throws {
        // Apple's "Defining a Custom Input Source": the client adds commands to the
        // source's buffer, signals the source and wakes the run loop.
        final class CommandSource: Sendable {
            let commands = PLocked<[String]>([])
            let processed = Recorder<(String, Bool)>()
            let registered = Recorder<String>()
            let source: Ref<RunLoopSource> = Ref()
            let loop: Ref<ThreadRunLoop> = Ref()
            init() {}
            func install(on thread: pthread_t) {
                // The closures capture what they use, not self: self holds the source.
                let registered = self.registered, processed = self.processed, commands = self.commands
                let loopRef = self.loop
                source.value = RunLoopSource(
                    schedule: { loop, mode in
                        loopRef.value = loop
                        registered.append("schedule:\(mode.rawValue)")
                    },
                    cancel: { _, mode in registered.append("cancel:\(mode.rawValue)") },
                    perform: {
                        let batch = commands.withLock { c in let b = c; c.removeAll(); return b }
                        for c in batch { processed.append((c, isCurrentThread(thread))) }
                    })
            }
            func add(_ command: String) { commands.withLock { $0.append(command) } }
            func fire() {
                source.value!.signal()
                loop.value!.wakeUp()
            }
        }
        let inputSource = CommandSource()
        let lt = LoopThread { loop -> RLResult in
            inputSource.install(on: pthread_self())
            loop.add(inputSource.source.value!, forMode: .default)
            let r = loop.run(mode: .default, for: .seconds(60), returnAfterSourceHandled: false)
            loop.remove(inputSource.source.value!, forMode: .default)
            return r
        }
        #expect(lt.waitUntilSleeping(in: .default))
        #expect(inputSource.loop.value === lt.loop, "schedule did not hand the source its loop")
        for batch in 0..<5 {
            for i in 0..<3 { inputSource.add("cmd \(batch).\(i)") }
            inputSource.fire()
            guard waitUntil({ inputSource.processed.count == (batch + 1) * 3 }) else {
                Issue.record("batch \(batch) was not processed")
                break
            }
        }
        lt.loop.stop()
        #expect(lt.join() == .stopped)
        let expected = (0..<5).flatMap { b in (0..<3).map { "cmd \(b).\($0)" } }
        #expect(inputSource.processed.values.map(\.0) == expected)
        #expect(inputSource.processed.values.allSatisfy { $0.1 }, "commands processed off the worker thread")
        #expect(inputSource.registered.values == ["schedule:\(RLMode.default.rawValue)", "cancel:\(RLMode.default.rawValue)"])
    }

    @Test("seed: XWLivingThread — the thread follows its owner's lifetime; waitUntilDone; .finished after stop")
    func xwLivingThreadLifecycle() throws {
        // A living-thread wrapper: owns a resident thread, hands it work, stops with its owner.
        final class LivingThread: Sendable {
            let thread: ResidentThread
            init(name: String) { thread = ResidentThread(name: name) }
            func execute(waitUntilDone: Bool, _ task: @escaping @Sendable () -> Void) throws(ResidentThread.Failure) {
                try thread.perform(waitUntilDone: waitUntilDone, task)
            }
            func stop() { thread.stop() }
        }

        // waitUntilDone: the task has run when execute returns.
        let living = LivingThread(name: uniqueThreadName("xw-"))
        let value = Ref<Int>()
        let ranOn = Ref<pid_t>()
        try living.execute(waitUntilDone: true) {
            block(for: .milliseconds(50))
            value.value = 42
            ranOn.value = gettid()
        }
        #expect(value.value == 42)
        let tid = try #require(ranOn.value)
        #expect(tid != gettid())
        #expect(threadExists(tid))
        // After stop, execute throws .finished — never a crash.
        living.stop()
        #expect(living.thread.isFinished)
        #expect(throws: ResidentThread.Failure.finished) { try living.execute(waitUntilDone: true) {} }
        #expect(throws: ResidentThread.Failure.finished) { try living.execute(waitUntilDone: false) {} }
        #expect(!threadExists(tid) || waitUntil { !threadExists(tid) })

        // The thread follows its owner: dropping the owner ends the thread.
        let weakThread: WeakRef<ResidentThread>
        let ownedTID: pid_t
        do {
            let owner = LivingThread(name: uniqueThreadName("xw-"))
            let t = Ref<pid_t>()
            try owner.execute(waitUntilDone: true) { t.value = gettid() }
            ownedTID = t.value ?? -1
            weakThread = WeakRef(owner.thread)
            #expect(threadExists(ownedTID))
        }
        #expect(waitUntil { weakThread.object == nil }, "the resident thread outlived its owner")
        #expect(waitUntil { !threadExists(ownedTID) }, "the OS thread outlived its owner")
    }
}

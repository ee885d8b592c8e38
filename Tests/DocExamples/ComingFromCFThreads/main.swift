import Foundation
import RunLoopKit
import Synchronization

// 1. performSelectorOnMainThread:withObject:waitUntilDone:YES from a worker thread. The main
// thread must be running its loop for the block to run.
let worker = ResidentThread(name: "worker")
try worker.perform {
    try? ThreadRunLoop.main.perform(waitUntilDone: true) {
        print("1. main thread runs the worker's block:", Thread.isMainThread)
    }
    print("1. worker: perform(waitUntilDone:) returned once it ran")
    ThreadRunLoop.main.stop()
}
ThreadRunLoop.main.run()                                  // returns on stop()
// On the main thread itself, waitUntilDone:YES runs the block at once, as Foundation does.
try ThreadRunLoop.main.perform(waitUntilDone: true) { print("1. main thread to itself: ran inline") }

// 2. performSelector:onThread:withObject:waitUntilDone:YES to an NSThread, not a ResidentThread:
// its entry adds a port, as [runLoop addPort:[NSMachPort port] …], so that run() has
// something to wait for, and hands its loop over.
let plainLoop = Mutex<ThreadRunLoop?>(nil)
let loopHandedOver = DispatchSemaphore(value: 0)
let loopReturned = DispatchSemaphore(value: 0)
let plain = Thread {
    let loop = ThreadRunLoop.current
    loop.add(try! MessagePort(), forMode: .default)
    plainLoop.withLock { $0 = loop }
    loopHandedOver.signal()
    loop.run()
    loopReturned.signal()
}
plain.start()
loopHandedOver.wait()
let plainThreadLoop = plainLoop.withLock { $0! }
try plainThreadLoop.perform(waitUntilDone: true) {
    print("2. plain thread runs the block on its loop:", ThreadRunLoop.current === plainThreadLoop)
}

// 3. Default modes. UITrackingRunLoopMode is a private mode that UIKit makes common; while the
// main thread runs it, what Foundation performs in the common modes runs, the rest waits.
let tracking = ThreadRunLoop.Mode("example.tracking")
ThreadRunLoop.main.addCommonMode(tracking)
try ThreadRunLoop.main.perform(waitUntilDone: false) {
    print("3. perform(waitUntilDone:) ran in", ThreadRunLoop.main.currentMode!)
}
ThreadRunLoop.main.perform { print("3. perform(inModes:) ran in", ThreadRunLoop.main.currentMode!) }
ThreadRunLoop.main.perform(after: .zero) {
    print("3. perform(after:) ran in", ThreadRunLoop.main.currentMode!)
    ThreadRunLoop.main.stop()
}
// The main loop's common modes serve the main queue, so they never empty: return after a block.
ThreadRunLoop.main.run(mode: tracking, for: .seconds(10), returnAfterSourceHandled: true)
ThreadRunLoop.main.run()                                  // the default mode: the other two

// 4. A view controller that was its port's delegate. MessagePort.Delegate is Sendable (the port
// calls it on its loop's thread, whoever holds the object), so its mutable state sits behind a
// Mutex — or the class is an actor pinned to that thread (see Resident threads).
final class FeedViewController: MessagePort.Delegate {
    private let rows = Mutex<[String]>([])                // received since the last commit

    // handleMachMessage: read msgh_id and the body out of a raw mach_msg_header_t; here they
    // arrive decoded, as handlePortMessage: gets them.
    func handlePortMessage(_ message: MessagePort.Message) {
        let text = String(decoding: message.data ?? Data(), as: UTF8.self)
        rows.withLock { $0.append("\(message.msgid):\(text)") }
    }

    // Core Animation commits in a .beforeWaiting observer: once per batch of messages here,
    // where CF calls it before each one.
    func commit() {
        let batch = rows.withLock { rows in defer { rows = [] }; return rows }
        print("4. commit after \(batch.count) messages:", batch.joined(separator: " "))
    }
}
let feed = FeedViewController()                           // held weakly by the port: keep it
let feedPort = try MessagePort()
feedPort.delegate = feed
let updating = ThreadRunLoop.Mode("example.updating")
ThreadRunLoop.main.add(feedPort, forMode: updating)
ThreadRunLoop.main.add(RunLoopObserver(activities: .beforeWaiting) { _, _ in
    feed.commit()
    ThreadRunLoop.main.stop()                             // an app would go on; the example ends
}, forMode: updating)
for (msgid, word) in zip(UInt32(1)..., ["a", "b", "c", "d", "e"]) {   // sent before the loop runs
    try feedPort.send(msgid: msgid, components: [.data(Data(word.utf8))], timeout: .seconds(1))
}
ThreadRunLoop.main.run(mode: updating, for: .seconds(10), returnAfterSourceHandled: false)

// 5. A block performed on the loop of a thread that has exited never runs: a waiting caller
// gets .finished rather than waiting for ever. The plain thread leaves run() and ends; the
// block fails whether it arrives before the thread's end (dropped then) or after.
plainThreadLoop.stop()
loopReturned.wait()
do {
    try plainThreadLoop.perform(waitUntilDone: true) { print("never printed") }
} catch {
    print("5. exited plain thread: perform(waitUntilDone:) threw", error)
}
worker.stop()
do {
    try worker.perform { print("never printed") }
} catch {
    print("5. stopped ResidentThread: perform threw", error)
}

import FoundationEssentials
import RunLoopKit

// An actor whose every method runs on one resident thread, between that thread's port
// messages and timers.
actor WordCounter {
    let thread = ResidentThread(name: "counter")
    private var counts: [String: Int] = [:]
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    func add(_ word: String) { counts[word, default: 0] += 1 }
    func count(_ word: String) -> Int { counts[word] ?? 0 }
    func isOnItsThread() -> Bool { ThreadRunLoop.current === thread.runLoop }
}

/// Nonisolated async code runs wherever the task's executor preference says.
func currentLoop() async -> ThreadRunLoop { ThreadRunLoop.current }

let counter = WordCounter()
let inbox = try MessagePort(queueLimit: 2)
let consumer = Task {                                    // in-process senders need no run loop
    for await message in inbox.messages() {
        let word = String(decoding: message.data ?? Data(), as: UTF8.self)
        if word == "." { break }
        await counter.add(word)
    }
}
Task { @MainActor in                                     // on the main thread, served by its loop
    for word in ["run", "loop", "run", "."] {
        try await inbox.send(msgid: 1, components: [.data(Data(word.utf8))])   // suspends while full
    }
    await consumer.value                                 // the consumer has seen "."
    print("run:", await counter.count("run"), "loop:", await counter.count("loop"))
    print("actor on its thread:", await counter.isOnItsThread())
    let loop = await withTaskExecutorPreference(counter.thread.executor) { await currentLoop() }
    print("preferred executor's thread:", loop === counter.thread.runLoop)
    ThreadRunLoop.main.stop()
}
ThreadRunLoop.main.run()                                 // serves DispatchQueue.main and @MainActor
print("main loop stopped")

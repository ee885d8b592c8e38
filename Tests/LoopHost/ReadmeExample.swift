// The README's "Swift concurrency and the main queue" example, kept identical to it (but for
// the wrapping function, since only main.swift may hold top-level code), so that an example
// that no longer compiles or runs fails the tests.

import FoundationEssentials
import RunLoopKit

actor Index {                                            // every method runs on "index"
    let thread = ResidentThread(name: "index")
    private var words: [String: Int] = [:]
    nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }
    func add(_ word: String) { words[word, default: 0] += 1 }
    func count(_ word: String) -> Int { words[word] ?? 0 }
}

func runReadmeExample() throws {
    let index = Index()
    let inbox = try MessagePort(queueLimit: 64)
    let consumer = Task {                                // no run loop needed for in-process senders
        for await message in inbox.messages() {
            await index.add(String(decoding: message.data ?? Data(), as: UTF8.self))
        }
    }
    Task { @MainActor in
        try await inbox.send(msgid: 1, components: [.data(Data("loop".utf8))])   // suspends while full
        try await Task.sleep(for: .milliseconds(10))
        print("loop:", await index.count("loop"))
        ThreadRunLoop.main.stop()
    }
    ThreadRunLoop.main.run()                             // the daemon's main thread: serves @MainActor
    consumer.cancel()
}

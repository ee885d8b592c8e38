// The README's example, kept identical to it but for the wrapping function (only main.swift may
// hold top-level code): MainDispatchQueueTests checks that the two match and runs it here, on a
// main thread running its loop as a program's top-level code would.

import RunLoopKit
import FoundationEssentials

func runReadmeExample() throws {
    let worker = ResidentThread(name: "worker")          // its loop runs until worker.stop()
    let service = try MessagePort()                        // received on the worker's loop
    service.setHandler { request in                        // runs on the worker thread
        let text = String(decoding: request.data ?? Data(), as: UTF8.self)
        try? request.replyPort?.send(msgid: request.msgid, components: [.data(Data(text.uppercased().utf8))],
                                     timeout: .seconds(1))
    }
    worker.runLoop.add(service, forMode: .default)

    let replies = try MessagePort()                        // received on the main thread's loop
    replies.setHandler { reply in print("reply:", String(decoding: reply.data!, as: UTF8.self)) }
    ThreadRunLoop.current.add(replies, forMode: .default)

    try service.send(msgid: 1000, components: [.data(Data("hello".utf8))], from: replies, timeout: .seconds(1))
    ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(5))   // prints "reply: HELLO"
    try worker.perform(waitUntilDone: true) { print("ran on the worker") }
    worker.stop()                                          // joins; perform now throws .finished
}

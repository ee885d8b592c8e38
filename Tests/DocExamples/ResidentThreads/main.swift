import RunLoopKit

// A thread whose loop runs until stop(): its keep-alive keeps the default mode from ever being empty.
let worker = ResidentThread(name: "worker")               // returns once the loop is running

// Synchronous hand-off: the caller blocks until the block has run on the worker.
try worker.perform(waitUntilDone: true) {
    print("on the worker:", ThreadRunLoop.current === worker.runLoop)
}

// Asynchronous hand-off, answered through a port that this thread's loop receives.
let answers = try MessagePort()
answers.setHandler { answer in print("answer", answer.msgid) }
ThreadRunLoop.current.add(answers, forMode: .default)
try worker.perform {
    try? answers.send(msgid: 1, timeout: .seconds(1))
}
ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))    // returns after the answer

// A timer on the worker's loop (performSelector:afterDelay: on that thread).
worker.runLoop.perform(after: .milliseconds(10)) {
    try? answers.send(msgid: 2, timeout: .seconds(1))
}
ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))

// A block may run the worker's loop again: the keep-alive makes the nested run sleep until the
// next source is handled (here the answer to a perform sent from inside), not return at once.
try worker.perform(waitUntilDone: true) {
    try? worker.perform { print("nested: handled") }
    let handled = ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))
    print("nested run returned", handled)
}

// stop() ends the loop and joins the thread; later hand-offs throw instead of crashing.
worker.stop()
print("finished:", worker.isFinished)
do {
    try worker.perform { print("never runs") }
} catch {
    print("perform after stop:", error)
}
ThreadRunLoop.current.remove(answers, forMode: .default)

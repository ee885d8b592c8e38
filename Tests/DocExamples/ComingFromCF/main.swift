import Foundation
import RunLoopKit
import Synchronization

// AFNetworking's network thread: [NSThread …] + [runLoop addPort:[NSMachPort port] …] + [runLoop run].
let network = ResidentThread(name: "network")

// performSelector:onThread:withObject:waitUntilDone:YES
try network.perform(waitUntilDone: true) {
    print("perform: on the network thread:", ThreadRunLoop.current === network.runLoop)
}

// NSMachPort + handlePortMessage: on the network thread; replies come back to this thread.
final class Echo: MessagePort.Delegate {
    func handlePortMessage(_ message: MessagePort.Message) {
        let text = String(decoding: message.data ?? Data(), as: UTF8.self)
        try? message.replyPort?.send(msgid: message.msgid + 1, components: [.data(Data(text.uppercased().utf8))],
                                     timeout: .seconds(1))
    }
}
let echo = Echo()                                         // the port holds its delegate weakly
let networkPort = try MessagePort()
networkPort.delegate = echo
network.runLoop.add(networkPort, forMode: .default)

let localPort = try MessagePort()
localPort.setHandler { reply in
    print("reply \(reply.msgid):", String(decoding: reply.data ?? Data(), as: UTF8.self))
}
ThreadRunLoop.current.add(localPort, forMode: .default)

// [remotePort sendBeforeDate:… msgid:1000 components:@[data] from:localPort reserved:0]
try networkPort.send(msgid: 1000, components: [.data(Data("hello".utf8))], from: localPort,
                     before: .now + .seconds(1))
// [[NSRunLoop currentRunLoop] runMode:NSDefaultRunLoopMode beforeDate:…]: returns after one source.
ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))

// CFRunLoopSourceCreate + CFRunLoopSourceSignal + CFRunLoopWakeUp: a command buffer that any
// thread fills and the source drains on the network thread.
final class CommandBuffer: @unchecked Sendable {           // `commands` only under `lock`
    private let lock = NSLock()
    private var commands: [String] = []
    func add(_ command: String) { lock.withLock { commands.append(command) } }
    func takeAll() -> [String] { lock.withLock { defer { commands = [] }; return commands } }
}
let buffer = CommandBuffer()
let commandSource = RunLoopSource(perform: {               // runs on the network thread
    for command in buffer.takeAll() {
        try? localPort.send(msgid: 1, components: [.data(Data("did \(command)".utf8))], timeout: .seconds(1))
    }
})
network.runLoop.add(commandSource, forMode: .default)
buffer.add("fetch")
commandSource.signal()                                    // marks it pending; does not wake
network.runLoop.wakeUp()
ThreadRunLoop.current.run(mode: .default, before: .now + .seconds(10))

// The timer-count example, in a private mode: CFRunLoopRunInMode returns kCFRunLoopRunFinished
// once the mode's last item is gone.
let counting = ThreadRunLoop.Mode("example.counting")
let observer = RunLoopObserver(activities: [.entry, .exit]) { _, activity in print("observer:", activity) }
ThreadRunLoop.current.add(observer, forMode: counting)
// performSelector:withObject:afterDelay: — a one-shot timer.
ThreadRunLoop.current.perform(after: .zero, inModes: [counting]) { print("performed after a delay") }
let fired = Atomic<Int>(0)
let timer = RunLoopTimer(interval: .milliseconds(10), repeats: true) { timer in
    let count = fired.add(1, ordering: .relaxed).newValue
    print("timer fired", count)
    if count == 3 { timer.invalidate() }                  // the mode's last item
}
timer.tolerance = .milliseconds(5)                        // NSTimer.tolerance: lets wake-ups coalesce
ThreadRunLoop.current.add(timer, forMode: counting)
let result = ThreadRunLoop.current.run(mode: counting, for: .seconds(10), returnAfterSourceHandled: false)
print("run(mode:for:) returned", result)

network.stop()                                            // unlike [NSRunLoop run], its loop stops

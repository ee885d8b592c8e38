import FoundationEssentials
import Glibc
import RunLoopKit

// One program, two roles: run without arguments it is the parent, which starts itself again as
// the child with a send right (a descriptor number) and a published name on its command line.
let arguments = CommandLine.arguments
if arguments.count == 3 {
    // The child: a proxy made from the inherited send right, then a second one found by name.
    let parent = try MessagePort(sendRight: Int32(arguments[1])!)
    let first = try parent.sendRequest(msgid: 1, components: [.data(Data("ping".utf8))],
                                       timeout: .seconds(10), replyMode: "child.reply")
    print("child: reply \(first.msgid):", String(decoding: first.data ?? Data(), as: UTF8.self))
    let named = try MessagePort.connect(to: arguments[2])
    let second = try named.sendRequest(msgid: 2, components: [.data(Data("by name".utf8))],
                                       timeout: .seconds(10), replyMode: "child.reply")
    print("child: reply \(second.msgid):", String(decoding: second.data ?? Data(), as: UTF8.self))
    exit(0)
}

// The parent: one port, reachable through a send right and through a name.
let service = try MessagePort()
service.setHandler { request in                          // on the parent's main thread
    let text = String(decoding: request.data ?? Data(), as: UTF8.self)
    // request.sender: the pid, uid and gid the kernel reports for the sending process.
    print("parent: request \(request.msgid) \"\(text)\" from uid", request.sender?.uid == getuid() ? "mine" : "other")
    try? request.replyPort?.send(msgid: request.msgid + 100, components: [.data(Data(text.uppercased().utf8))],
                                 timeout: .seconds(1))
    if request.msgid == 2 { ThreadRunLoop.current.stop() }
}
service.setTransportErrorHandler { error in print("parent: a peer was dropped:", error) }
ThreadRunLoop.current.add(service, forMode: .default)
let name = "com.example.greeter.\(getpid())"             // names are host-wide per user: one per run
try service.publish(as: name, access: .sameUser)
let right = try service.makeSendRight(inheritable: true) // survives exec; close-on-exec otherwise

var child: pid_t = 0
let words = ["/proc/self/exe", String(right), name]
let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
guard posix_spawn(&child, "/proc/self/exe", nil, nil, argv, environ) == 0 else { fatalError("posix_spawn failed") }
argv.forEach { free($0) }
close(right)                                             // the child holds its own copy now

ThreadRunLoop.current.run(until: .now + .seconds(30))    // until the second request stops it
var status: Int32 = 0
waitpid(child, &status, 0)
print("parent: child exited with status", (status >> 8) & 0xff)
service.invalidate()                                     // also unpublishes the name

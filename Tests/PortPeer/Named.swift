// PortPeer's named-port modes (Guarantees §3.25–28), public API only:
//
//   as <uid> <gid> <mode> <args…>   drops to uid/gid (setgroups, setgid, setuid), then runs <mode>.
//   serve-name <name> <access> <behaviour>
//                                   publishes a port as <name> (access: same-user, anyone,
//                                   users:U1,U2, groups:G1), prints "published", and answers each
//                                   message that has a reply port: `reply` with msgid + 1 and DATA
//                                   "re: <data>"; `silent` never answers (prints "got <msgid>");
//                                   `twice` answers, waits until the reply port is dead, answers
//                                   again and prints "second reply: <error>". Runs until killed.
//   request-name <name> <count>     connects, makes <count> sendRequest calls in a private mode,
//                                   checks every reply, prints "ok <count>" and exits 0.
//   connect-name <name>             connects and sends msgid 7 "hello from <pid>"; prints
//                                   "connected" or "error <PortError>"; exits 0 either way.
//   publish-name <name>             prints "published" or "error <PortError>", then runs until killed.
//   relay-name <name> [count]       connects, sends msgid 1 "relay <pid>", then starts
//                                   `send-right 3` (with a count: `send-wait 3 <count>`) with the
//                                   proxy's send right at fd 3, waits for it.
//   exec <path> <args…>             replaces itself with <path> (after `as`: runs a program as
//                                   another user).
//   send-right <fd>                 sends msgid 2 "third <pid>" through an inherited send right,
//                                   then waits (10 s) for the owner to drop the connection and
//                                   prints "dropped" if it did.
//   send-count <fd> <count>         sends msgid 0 … count-1 ("n <pid>") through an inherited send
//                                   right, prints "sent <count>" and exits at once.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// The arguments of the mode being run (`as` drops its own three).
nonisolated(unsafe) var modeArguments = CommandLine.arguments

func argument(_ index: Int) -> String {
    let arguments = modeArguments
    guard arguments.count > index else { fail("missing argument \(index)") }
    return arguments[index]
}

func parseAccess(_ text: String) -> MessagePort.Access {
    func ids(_ list: Substring) -> Set<UInt32> { Set(list.split(separator: ",").compactMap { UInt32($0) }) }
    switch text {
    case "same-user": return .sameUser
    case "anyone": return .anyone
    default:
        if text.hasPrefix("users:") { return .users(ids(text.dropFirst(6))) }
        if text.hasPrefix("groups:") { return .groups(ids(text.dropFirst(7))) }
        fail("unknown access \(text)")
    }
}

/// Drops every privilege, then runs the mode named after the ids.
func runAs() -> Never {
    guard let uid = UInt32(argument(2)), let gid = UInt32(argument(3)) else { fail("as <uid> <gid> <mode>") }
    guard setgroups(0, nil) == 0, setgid(gid) == 0, setuid(uid) == 0 else {
        fail("dropping to \(uid):\(gid): \(String(cString: strerror(errno)))")
    }
    modeArguments.removeSubrange(1...3)
    runMode()
}

func serveName() -> Never {
    let name = argument(2), access = parseAccess(argument(3)), behaviour = argument(4)
    let port = makeLocalPort()
    let loop = ThreadRunLoop.current
    port.setHandler { message in
        guard let replyPort = message.replyPort else { return }
        switch behaviour {
        case "silent":
            say("got \(message.msgid)")
        case "twice":
            replyTo(message, through: replyPort)
            replyPort.setInvalidationHandler { dead in
                do {
                    try dead.send(msgid: message.msgid + 2, timeout: .seconds(1))
                    say("second reply: sent")
                } catch {
                    say("second reply: \(error)")
                }
            }
            loop.add(replyPort, forMode: .default)
        default:
            replyTo(message, through: replyPort)
        }
    }
    port.setTransportErrorHandler { error in say("transport error: \(error)") }
    loop.add(port, forMode: .default)
    do { try port.publish(as: name, access: access) } catch { fail("publish(as: \(name)) threw \(error)") }
    say("published")
    loop.run()
    exit(0)
}

func replyTo(_ message: MessagePort.Message, through replyPort: MessagePort) {
    do {
        try replyPort.send(msgid: message.msgid + 1, components: [.data(Data("re: ".utf8) + (message.data ?? Data()))],
                           timeout: .seconds(10))
    } catch {
        say("reply failed: \(error)")
    }
}

func requestName() -> Never {
    let name = argument(2)
    guard let count = Int(argument(3)) else { fail("request-name <name> <count>") }
    let server: MessagePort
    do { server = try MessagePort.connect(to: name) } catch { fail("connect(to: \(name)) threw \(error)") }
    for index in 0..<count {
        let text = "request \(index) from \(getpid())"
        do {
            let reply = try server.sendRequest(msgid: 100, components: [.data(Data(text.utf8))],
                                               timeout: .seconds(10), replyMode: "PortPeer.request")
            guard reply.msgid == 101, reply.data == Data(("re: " + text).utf8) else {
                fail("request \(index): unexpected reply \(reply)")
            }
        } catch {
            fail("request \(index) threw \(error)")
        }
    }
    say("ok \(count)")
    exit(0)
}

func connectName() -> Never {
    do {
        let server = try MessagePort.connect(to: argument(2))
        say("connected")
        try server.send(msgid: 7, components: [.data(Data("hello from \(getpid())".utf8))], timeout: .seconds(10))
    } catch {
        say("error \(error)")
    }
    exit(0)
}

func publishName() -> Never {
    let port = makeLocalPort()
    let loop = ThreadRunLoop.current
    port.setHandler { _ in }
    loop.add(port, forMode: .default)
    do {
        try port.publish(as: argument(2))
        say("published")
    } catch {
        say("error \(error)")
    }
    loop.run()
    exit(0)
}

func relayName() -> Never {
    let server: MessagePort
    do {
        server = try MessagePort.connect(to: argument(2))
        try server.send(msgid: 1, components: [.data(Data("relay \(getpid())".utf8))], timeout: .seconds(10))
    } catch {
        fail("relay: \(error)")
    }
    let right: Int32
    do { right = try server.makeSendRight() } catch { fail("makeSendRight threw \(error)") }
    // With a count, the third process sends that many frames and waits for the owner to drop it.
    let mode = modeArguments.count > 3 ? ["send-wait", "3", argument(3)] : ["send-right", "3"]
    let third = spawn(ownExecutable(), mode, inherit: [(right, 3)])
    close(right)
    say("relay \(getpid()) third \(third)")
    guard let status = waitForExit(third, timeout: .seconds(20)) else { fail("the third process did not exit") }
    exit(status)
}

func sendThroughRight() -> Never {
    let server = proxy(Int32(argument(2)) ?? -1)
    do {
        try server.send(msgid: 2, components: [.data(Data("third \(getpid())".utf8))], timeout: .seconds(10))
    } catch {
        say("send failed: \(error)")
        exit(0)
    }
    say("sent")
    let dropped = Box(false)
    server.setInvalidationHandler { _ in dropped.value = true }
    ThreadRunLoop.current.add(server, forMode: .default)
    if runLoop(for: .seconds(10), until: { dropped.value }) { say("dropped") }
    exit(0)
}

func sendCount() -> Never {
    let server = proxy(Int32(argument(2)) ?? -1)
    guard let count = UInt32(argument(3)) else { fail("send-count <fd> <count>") }
    for msgid in 0..<count {
        do {
            try server.send(msgid: msgid, components: [.data(Data("n \(getpid())".utf8))], timeout: .seconds(10))
        } catch {
            fail("send \(msgid) threw \(error)")
        }
    }
    say("sent \(count)")
    exit(0)
}

func execProgram() -> Never {
    let arguments = Array(modeArguments.dropFirst(2))
    let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
    execv(argument(2), argv)
    fail("execv \(argument(2)): \(String(cString: strerror(errno)))")
}

func runMode() -> Never {
    switch modeArguments.count > 1 ? modeArguments[1] : "" {
    case "client": client()
    case "forward": forward()
    case "third": third()
    case "own": own()
    case "twice": own(repliesTwice: true)
    case "stream": stream()
    case "exhaust": exhaust()
    case "as": runAs()
    case "serve-name": serveName()
    case "request-name": requestName()
    case "connect-name": connectName()
    case "publish-name": publishName()
    case "relay-name": relayName()
    case "reply-to-self": replyToSelf()
    case "send-wait": sendAndWait()
    case "serve-fitted": serveFitted()
    case "hold-name": holdName()
    case "starve": starve()
    case "send-right": sendThroughRight()
    case "send-count": sendCount()
    case "refuse-ports": refusePorts()
    case "exec": execProgram()
    case "rlimit": resourceLimits()
    case "rlimit-thread": residentThreadWithoutDescriptors()
    case "sink": sink()
    case "sealed-echo": sealedEcho()
    case "soak": soak()
    case "soak-stream", "soak-stream-name": soakStream()
    default:
        fail("usage: PortPeer client | forward | third | own | twice | stream | exhaust | as | serve-name | request-name "
             + "| connect-name | publish-name | relay-name | send-right | rlimit | rlimit-thread | sink (see the sources)")
    }
    exit(0)
}

// PortPeer modes for the security review's tests (RunLoopKitTransportTests/SecurityReviewTests):
//
//   reply-to-self <name>     connects and sends msgid 9 whose reply port is that same connection
//                            (the owner's reply comes back to the owner), prints "sent", waits 10 s.
//   send-wait <fd> <count>   sends msgid 2 "third <pid>" <count> times through an inherited send
//                            right, prints "sent <count>", then waits (10 s) for the owner to drop it.
//   serve-fitted <name>      with a soft RLIMIT_NOFILE of 1,024, publishes <name> to anyone with the
//                            default limits, prints "published limit <connectionsPerUser>", and
//                            answers requests as serve-name does.
//   hold-name <name>         connects to <name> until refused (5 s timeout each), prints
//                            "held <count>: <error>", then holds them (60 s).
//   starve <name>            publishes <name>; after msgid 1 takes every free descriptor; reports
//                            and messages are printed ("report …", "got <msgid> ports <n>"); msgid 3
//                            gives the descriptors back and prints "discarded <n>"; exits after msgid 4.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

func replyToSelf() -> Never {
    do {
        let server = try MessagePort.connect(to: argument(2))
        try server.send(msgid: 9, components: [.data(Data("reply to yourself".utf8))], from: server, timeout: .seconds(10))
        say("sent")
        sleep(10)
    } catch {
        say("error \(error)")
    }
    exit(0)
}

func sendAndWait() -> Never {
    let server = proxy(Int32(argument(2)) ?? -1)
    guard let count = Int(argument(3)) else { fail("send-wait <fd> <count>") }
    for _ in 0..<count {
        do {
            try server.send(msgid: 2, components: [.data(Data("third \(getpid())".utf8))], timeout: .seconds(10))
        } catch {
            fail("send threw \(error)")
        }
    }
    say("sent \(count)")
    let dropped = Box(false)
    server.setInvalidationHandler { _ in dropped.value = true }
    ThreadRunLoop.current.add(server, forMode: .default)
    _ = runLoop(for: .seconds(10), until: { dropped.value })
    exit(0)
}

func serveFitted() -> Never {
    lowerDescriptorLimit(to: 1024)
    let name = argument(2)
    let port = makeLocalPort()
    let loop = ThreadRunLoop.current
    port.setHandler { message in
        if let replyPort = message.replyPort { replyTo(message, through: replyPort) }
    }
    port.setTransportErrorHandler { error in say("transport error: \(error)") }
    loop.add(port, forMode: .default)
    do { try port.publish(as: name, access: .anyone) } catch { fail("publish(as: \(name)) threw \(error)") }
    say("published limit \(MessagePort.NameLimits.default.connectionsPerUser)")
    loop.run()
    exit(0)
}

func holdName() -> Never {
    var limit = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &limit)
    var held: [MessagePort] = []
    while true {
        do {
            held.append(try MessagePort.connect(to: argument(2), timeout: .seconds(5)))
        } catch {
            say("held \(held.count): \(error)")
            break
        }
    }
    sleep(60)
    exit(0)
}

func starve() -> Never {
    let name = argument(2)
    let port = makeLocalPort()
    let loop = ThreadRunLoop.current
    let taken = Box<[Int32]>([])
    let done = Box(false)
    port.setHandler { message in
        let ports = message.components.filter { if case .port = $0 { true } else { false } }.count
        say("got \(message.msgid) ports \(ports)")
        switch message.msgid {
        case 1:
            taken.value = takeEveryDescriptor()
            say("starved")
        case 3:
            for descriptor in taken.value { close(descriptor) }
            taken.value = []
            say("discarded \(port.statistics.discarded)")
        case 4:
            done.value = true
        default:
            break
        }
    }
    port.setTransportReportHandler { report in say("report \(report)") }
    loop.add(port, forMode: .default)
    do { try port.publish(as: name) } catch { fail("publish(as: \(name)) threw \(error)") }
    say("published")
    _ = runLoop(for: .seconds(20), until: { done.value })
    exit(0)
}

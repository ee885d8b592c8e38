// PortPeer modes for the resource-limit tests (RunLoopKitTransportTests/ResourceLimitTests):
//
//   rlimit <name>      with RLIMIT_NOFILE at 64: send rights, named connections and a published
//                      name are refused with typed errors once descriptors run out (a port too,
//                      when it needs a descriptor of its own),
//                      while the send right and named connection made before keep delivering;
//                      once descriptors are given back each works again. Prints "rlimit ok".
//   rlimit-thread      with every descriptor number taken, starts a ResidentThread: its run loop
//                      cannot make its wake-up eventfd, the documented precondition failure.
//   sink <fd>          owns a port, sends it to <fd> as msgid 500 [port], and checks that the
//                      messages on it arrive as msgid 0, 1, 2, … until msgid 0xFFFFFFFF, then
//                      prints "sink received <n> in order" and exits 0.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// Lowers the soft RLIMIT_NOFILE to `limit`.
func lowerDescriptorLimit(to limit: rlim_t) {
    var current = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &current)
    current.rlim_cur = limit
    guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &current) == 0 else {
        fail("setrlimit: \(String(cString: strerror(errno)))")
    }
}

/// Takes every free descriptor number (duplicates of stdin); returns them.
func takeEveryDescriptor() -> [Int32] {
    var taken: [Int32] = []
    while true {
        let fd = dup(0)
        guard fd >= 0 else {
            guard errno == EMFILE else { fail("dup: \(String(cString: strerror(errno)))") }
            return taken
        }
        taken.append(fd)
    }
}

func resourceLimits() -> Never {
    let name = argument(2)
    let owner = ResidentThread(name: "rlimit-owner")
    let port = makeLocalPort()
    let delivered = Box<[UInt32]>([])
    let reported = Box<[PortError]>([])
    port.setHandler { message in delivered.update { $0.append(message.msgid) } }
    port.setTransportErrorHandler { error in reported.update { $0.append(error) } }
    owner.runLoop.add(port, forMode: .default)
    // What the process has before the limit: a send right and a named connection.
    let right: MessagePort
    let named: MessagePort
    let unpublished = makeLocalPort()
    do {
        try port.publish(as: name)
        right = proxy(try port.makeSendRight())
        named = try MessagePort.connect(to: name)
        try right.send(msgid: 1, timeout: .seconds(10))
        try named.send(msgid: 2, timeout: .seconds(10))
    } catch {
        fail("setup threw \(error)")
    }
    guard waitUntil(.seconds(10), { delivered.value.count == 2 }) else { fail("setup messages not delivered") }

    let baseline = openDescriptorCount()
    lowerDescriptorLimit(to: 64)
    var failures: [String] = []
    func expectExhausted(_ what: String, _ body: () throws(PortError) -> Void) {
        do {
            try body()
            failures.append("\(what) succeeded with no descriptor numbers left")
        } catch {
            say("\(what) threw \(error)")
            if error != .resourceExhausted(errno: EMFILE) { failures.append("\(what) threw \(error), expected resourceExhausted(errno: EMFILE)") }
        }
    }
    // Ports scheduled on the owner's loop, taking what descriptors they need (a port may need
    // none until it is used across processes), then every descriptor number that is left.
    var ports: [MessagePort] = []
    for _ in 0..<16 {
        do {
            let made = try MessagePort()
            owner.runLoop.add(made, forMode: .default)
            ports.append(made)
        } catch {
            say("MessagePort() number \(ports.count + 1) threw \(error)")
            if error != .resourceExhausted(errno: EMFILE) { failures.append("MessagePort() threw \(error)") }
            break
        }
    }
    let filler = takeEveryDescriptor()
    // A port that needs no descriptor of its own may still be made; one that needs one is refused.
    do {
        _ = try MessagePort()
        say("MessagePort() made a port without a descriptor")
    } catch {
        say("MessagePort() threw \(error)")
        if error != .resourceExhausted(errno: EMFILE) { failures.append("MessagePort() threw \(error), expected resourceExhausted(errno: EMFILE)") }
    }
    expectExhausted("makeSendRight()") { () throws(PortError) in close(try port.makeSendRight()) }
    expectExhausted("connect(to:)") { () throws(PortError) in _ = try MessagePort.connect(to: name) }
    expectExhausted("publish(as:)") { () throws(PortError) in try unpublished.publish(as: name + "-2") }

    // Still serving what it has.
    do {
        try right.send(msgid: 3, timeout: .seconds(10))
        try named.send(msgid: 4, timeout: .seconds(10))
    } catch {
        failures.append("sending on existing rights threw \(error)")
    }
    if !waitUntil(.seconds(10), { delivered.value.count == 4 }) { failures.append("existing rights stopped delivering") }

    // Descriptors given back: each works again.
    for fd in filler { close(fd) }
    // Not a for-in loop: in a debug build its hidden iterator, and the array it copied, would
    // live to the end of the function.
    ports.forEach { $0.invalidate() }
    ports = []
    // The owner's loop lets go of the invalidated ports (and closes their descriptors) on its
    // thread, after their invalidation woke it.
    if !waitUntil(.seconds(10), { (0...baseline).contains(openDescriptorCount()) }) {
        failures.append("\(openDescriptorCount()) descriptors open after everything was given back, \(baseline) before")
    }
    var step = "MessagePort()"
    do {
        _ = try MessagePort()
        step = "makeSendRight()"
        close(try port.makeSendRight())
        step = "connect(to:)"
        let again = try MessagePort.connect(to: name)
        try again.send(msgid: 5, timeout: .seconds(10))
    } catch {
        failures.append("after the descriptors were given back, \(step) threw \(error) (\(openDescriptorCount()) open, \(baseline) before)")
    }
    if !waitUntil(.seconds(10), { delivered.value.count == 5 }) { failures.append("nothing delivered after recovery") }
    if delivered.value != [1, 2, 3, 4, 5] { failures.append("delivered \(delivered.value)") }
    if !reported.value.isEmpty { failures.append("transport errors \(reported.value)") }
    guard failures.isEmpty else { fail(failures.joined(separator: "\n")) }
    say("rlimit ok")
    exit(0)
}

func residentThreadWithoutDescriptors() -> Never {
    lowerDescriptorLimit(to: 64)
    _ = takeEveryDescriptor()
    let thread = ResidentThread(name: "rlimit-thread")
    say("ResidentThread started without descriptors: \(thread)")
    exit(0)
}

func sink() -> Never {
    let parent = proxy(descriptorArgument(2))
    let port = makeLocalPort()
    let next = Box<UInt32>(0)
    port.setHandler { message in
        if message.msgid == .max {
            say("sink received \(next.value) in order")
            exit(0)
        }
        guard message.msgid == next.value else { fail("sink: msgid \(message.msgid) where \(next.value) was due") }
        next.value += 1
    }
    ThreadRunLoop.current.add(port, forMode: .default)
    do { try parent.send(msgid: 500, components: [.port(port)], timeout: .seconds(10)) } catch {
        fail("could not send the port to the parent: \(error)")
    }
    while true {
        ThreadRunLoop.current.run(until: ContinuousClock.now + .seconds(3600))
    }
}

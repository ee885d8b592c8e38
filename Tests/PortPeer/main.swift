// PortPeer: the Swift-side child process of RunLoopKitTransportTests. It uses RunLoopKit's
// public API only (no @testable), like any other program holding a port send right.
//
// Modes (a descriptor argument is a send right the parent put at that number):
//   client <fd> <expectedReply>   send msgid 1000 ("hello from Swift child") with a reply port;
//                                 exit 0 once msgid 1001 with DATA <expectedReply> arrives.
//   forward <fd>                  process B of the three-process test: spawns C (`third`) with a
//                                 send right to B's own port; when C asks, hands C the port it
//                                 holds a proxy for (<fd>, A's port) as a message component.
//   third <fd>                    process C: asks B (<fd>) for a port and, once B says it has
//                                 dropped its own right to it, sends to that port msgid 3000
//                                 with "C pid <pid> nonce <n>". Exits 0.
//   own <fd>                      owns a port Q; sends msgid 500 [port Q, port Q] to <fd>; replies
//                                 to every message on Q that has a reply port; runs until killed.
//   twice <fd>                    as `own`, but replies twice to each message, back to back, and
//                                 prints what each send returned (§3.50).
//   stream <fd>                   sends msgid 0, 1, 2, … (64-byte DATA) to <fd> until killed.
//   exhaust                       lowers RLIMIT_NOFILE and shows typed errors (see `exhaust()`).
//
// Output: lines on stdout for the test to check; failures on stderr with exit status 1.

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit
import Synchronization

// MARK: - Helpers

/// A value shared between a port handler (loop thread) and the code waiting for it.
final class Box<T: Sendable>: Sendable {
    private let storage: Locked<T>
    init(_ value: T) { storage = Locked(value) }
    var value: T {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }
    func update(_ change: (inout T) -> Void) { storage.withLock { change(&$0) } }
}

func say(_ line: String) {
    var bytes = Array((line + "\n").utf8)
    _ = write(STDOUT_FILENO, &bytes, bytes.count)
}

func fail(_ line: String) -> Never {
    var bytes = Array(("PortPeer: " + line + "\n").utf8)
    _ = write(STDERR_FILENO, &bytes, bytes.count)
    exit(1)
}

func descriptorArgument(_ index: Int) -> Int32 {
    let arguments = CommandLine.arguments
    guard arguments.count > index, let value = Int32(arguments[index]) else {
        fail("missing descriptor argument \(index)")
    }
    return value
}

func proxy(_ descriptor: Int32) -> MessagePort {
    do {
        let port = try MessagePort(sendRight: descriptor)
        guard port.isProxy else { fail("MessagePort(sendRight:) is not a proxy") }
        return port
    } catch {
        fail("MessagePort(sendRight: \(descriptor)) threw \(error)")
    }
}

func text(_ data: Data?) -> String? { data.map { String(decoding: $0, as: UTF8.self) } }

/// Runs the calling thread's loop in the default mode until `condition` holds or `timeout`
/// passes. Returns whether the condition held.
func runLoop(for timeout: Duration, until condition: () -> Bool) -> Bool {
    let loop = ThreadRunLoop.current
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { return false }
        if loop.run(mode: .default, for: left, returnAfterSourceHandled: true) == .finished {
            return condition()
        }
    }
    return true
}

/// posix_spawn of `path` with `arguments`; `inherit` maps descriptors of this process to the
/// numbers the child gets them at (only those cross exec: everything else is close-on-exec).
func spawn(_ path: String, _ arguments: [String], inherit: [(from: Int32, to: Int32)]) -> pid_t {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var temporaries: [Int32] = []
    for (from, to) in inherit {
        var source = from
        if source == to {
            // dup2(fd, fd) would keep close-on-exec: go through another number.
            source = fcntl(from, F_DUPFD_CLOEXEC, 0)
            temporaries.append(source)
        }
        posix_spawn_file_actions_adddup2(&actions, source, to)
    }
    defer { for descriptor in temporaries { close(descriptor) } }
    let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
    defer { for pointer in argv { free(pointer) } }
    var pid: pid_t = 0
    let result = posix_spawn(&pid, path, &actions, nil, argv, environ)
    guard result == 0 else { fail("posix_spawn \(path): \(String(cString: strerror(result)))") }
    return pid
}

func waitForExit(_ pid: pid_t, timeout: Duration) -> Int32? {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        var status: Int32 = 0
        let result = waitpid(pid, &status, WNOHANG)
        if result == pid {
            return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        }
        if result < 0 { return nil }
        usleep(5_000)
    }
    return nil
}

func ownExecutable() -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard count > 0 else { fail("readlink /proc/self/exe") }
    return String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

func makeLocalPort(_ queueLimit: Int = 1024) -> MessagePort {
    do { return try MessagePort(queueLimit: queueLimit) } catch { fail("MessagePort() threw \(error)") }
}

// MARK: - Modes

/// Request/reply through a proxy: the parent's handler replies through `message.replyPort`.
func client() {
    let server = proxy(descriptorArgument(2))
    let expected = CommandLine.arguments.count > 3 ? CommandLine.arguments[3] : ""
    let replyPort = makeLocalPort()
    let reply = Box<MessagePort.Message?>(nil)
    replyPort.setHandler { message in reply.value = message }
    ThreadRunLoop.current.add(replyPort, forMode: .default)
    do {
        try server.send(msgid: 1000, components: [.data(Data("hello from Swift child".utf8))],
                        from: replyPort, timeout: .seconds(10))
    } catch {
        fail("send to the parent's port threw \(error)")
    }
    say("sent msgid=1000")
    guard runLoop(for: .seconds(10), until: { reply.value != nil }), let message = reply.value else {
        fail("no reply within 10 s")
    }
    say("received msgid=\(message.msgid) data=\"\(text(message.data) ?? "")\"")
    guard message.msgid == 1001, text(message.data) == expected else {
        fail("expected msgid 1001 with \"\(expected)\"")
    }
    // Nothing received outlives the exchange (LeakSanitizer checks this process at exit).
    replyPort.invalidate()
    reply.value = nil
}

/// Process B: holds a proxy for A's port and passes it to C inside a message.
func forward() {
    let portOfA = proxy(descriptorArgument(2))
    let own = makeLocalPort()
    let request = Box<MessagePort.Message?>(nil)
    own.setHandler { message in request.value = message }
    ThreadRunLoop.current.add(own, forMode: .default)

    let rightForC: Int32
    do { rightForC = try own.makeSendRight() } catch { fail("makeSendRight threw \(error)") }
    let pidOfC = spawn(ownExecutable(), ["third", "3"], inherit: [(rightForC, 3)])
    close(rightForC)
    say("B pid=\(getpid()) spawned C pid=\(pidOfC)")

    guard runLoop(for: .seconds(10), until: { request.value != nil }), let message = request.value else {
        kill(pidOfC, SIGKILL)
        fail("C did not ask for the port within 10 s")
    }
    guard message.msgid == 2000, let replyPort = message.replyPort, replyPort.isProxy else {
        kill(pidOfC, SIGKILL)
        fail("unexpected request from C: \(message)")
    }
    // Tell A which process C is, then hand C the port: B's own proxy for A's port.
    do {
        try portOfA.send(msgid: 2999, components: [.data(Data("B \(getpid()) C \(pidOfC)".utf8))], timeout: .seconds(10))
        try replyPort.send(msgid: 2001, components: [.port(portOfA)], timeout: .seconds(10))
    } catch {
        kill(pidOfC, SIGKILL)
        fail("B could not send: \(error)")
    }
    // B lets go of A's port: from now on only C holds a send right to it. Then B tells C to
    // go ahead, so that C's message is sent strictly after B dropped its right.
    portOfA.invalidate()
    do {
        try replyPort.send(msgid: 2002, timeout: .seconds(10))
    } catch {
        kill(pidOfC, SIGKILL)
        fail("B could not tell C to go ahead: \(error)")
    }
    say("B forwarded A's port to C and dropped its own")
    guard let status = waitForExit(pidOfC, timeout: .seconds(10)) else {
        kill(pidOfC, SIGKILL)
        fail("C did not exit within 10 s")
    }
    say("C exited with \(status)")
    exit(status == 0 ? 0 : 1)
}

/// Process C: obtains A's port only as a component of B's message, and sends to it.
func third() {
    let portOfB = proxy(descriptorArgument(2))
    let own = makeLocalPort()
    let answers = Box<[MessagePort.Message]>([])
    own.setHandler { message in answers.update { $0.append(message) } }
    ThreadRunLoop.current.add(own, forMode: .default)
    do {
        try portOfB.send(msgid: 2000, components: [.data(Data("C \(getpid())".utf8))], from: own, timeout: .seconds(10))
    } catch {
        fail("C could not ask B: \(error)")
    }
    // 2001 carries A's port; 2002 says B has dropped its own right to it.
    guard runLoop(for: .seconds(10), until: { answers.value.count >= 2 }) else {
        fail("B did not answer within 10 s: \(answers.value)")
    }
    let message = answers.value[0]
    guard message.msgid == 2001, message.components.count == 1, let portOfA = message.port(at: 0), portOfA.isProxy,
          answers.value[1].msgid == 2002 else {
        fail("unexpected answers from B: \(answers.value)")
    }
    // A value only this process knows: A checks that it arrives on its port.
    let nonce = UInt64.random(in: 1...UInt64.max)
    do {
        try portOfA.send(msgid: 3000, components: [.data(Data("C pid \(getpid()) nonce \(nonce)".utf8))], timeout: .seconds(10))
    } catch {
        fail("C could not send to A's port: \(error)")
    }
    say("C sent msgid=3000 nonce=\(nonce)")
    exit(0)
}

/// Owns a port, hands the parent two send rights to it, serves until killed.
func own(repliesTwice: Bool = false) {
    let parent = proxy(descriptorArgument(2))
    let port = makeLocalPort()
    port.setHandler { message in
        guard let reply = message.replyPort else { return }
        guard repliesTwice else {
            try? reply.send(msgid: message.msgid + 1, components: message.components, timeout: .seconds(10))
            return
        }
        // A buggy or hostile responder: two replies back to back, each outcome reported.
        var outcomes: [String] = []
        for attempt in UInt32(1)...2 {
            do throws(PortError) {
                try reply.send(msgid: message.msgid + attempt, timeout: .seconds(10))
                outcomes.append("sent")
            } catch {
                outcomes.append("\(error)")
            }
        }
        say("msgid=\(message.msgid) replies: \(outcomes.joined(separator: ", ")) proxy valid: \(reply.isValid)")
    }
    ThreadRunLoop.current.add(port, forMode: .default)
    do {
        try parent.send(msgid: 500, components: [.port(port), .port(port), .data(Data("\(getpid())".utf8))],
                        timeout: .seconds(10))
    } catch {
        fail("could not send the port to the parent: \(error)")
    }
    say("owner pid=\(getpid()) serving")
    while true {
        ThreadRunLoop.current.run(until: ContinuousClock.now + .seconds(3600))
    }
}

/// Streams messages to the parent's port until killed.
func stream() {
    let port = proxy(descriptorArgument(2))
    let payload = Data(repeating: 0x5A, count: 64)
    var msgid: UInt32 = 0
    while true {
        do {
            try port.send(msgid: msgid, components: [.data(payload)], timeout: .seconds(30))
        } catch {
            fail("stream: send \(msgid) threw \(error)")
        }
        msgid &+= 1
    }
}

/// Descriptor exhaustion. With RLIMIT_NOFILE lowered so that no new descriptor can be made:
/// `MessagePort()` still works (a local port holds no descriptor), `makeSendRight()` throws
/// `.resourceExhausted(errno: EMFILE)`, and a frame
/// whose port component cannot be installed on receipt is this process's exhaustion (§3.57):
/// reported through the transport error handler as `.resourceExhausted(errno: EMFILE)`, counted
/// as discarded, nothing delivered, and its connection kept. With the limit restored, the same
/// connection and the port work again and no descriptor leaked.
func exhaust() {
    let receiverThread = ResidentThread(name: "exhaust-receiver")
    let port = makeLocalPort()
    let delivered = Box<[UInt32]>([])
    let errors = Box<[PortError]>([])
    port.setHandler { message in delivered.update { $0.append(message.msgid) } }
    port.setTransportErrorHandler { error in errors.update { $0.append(error) } }
    receiverThread.runLoop.add(port, forMode: .default)

    // Everything the frames below need is made before the limit is lowered. The port component
    // is a proxy: sending it sends its own descriptor, nothing is created on the sending side.
    let componentOwner = makeLocalPort()
    let component: MessagePort
    do { component = proxy(try componentOwner.makeSendRight()) } catch { fail("setup threw \(error)") }
    // The port's connection set (an epoll descriptor) is made with its first send right: make
    // one and let it go, so that the set exists at the baseline.
    do { close(try port.makeSendRight()) } catch { fail("makeSendRight threw \(error)") }
    guard waitUntil(.seconds(10), { port.connectionCount == 0 }) else { fail("a closed send right's connection stayed") }
    let baseline = openDescriptorCount()
    let baselineTable = descriptorTable()
    var sender: MessagePort?
    do { sender = proxy(try port.makeSendRight()) } catch { fail("makeSendRight threw \(error)") }
    guard port.connectionCount == 1, componentOwner.connectionCount == 1 else {
        fail("connections not counted: \(port.connectionCount), \(componentOwner.connectionCount)")
    }
    // One message that needs no descriptor on receipt, to show the connection works.
    do { try sender!.send(msgid: 1, timeout: .seconds(10)) } catch { fail("send 1 threw \(error)") }
    guard waitUntil(.seconds(10), { delivered.value == [1] }) else { fail("message 1 not delivered") }

    var original = rlimit()
    getrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &original)
    // The lowest free descriptor number: below the limit every number is taken, so no new
    // descriptor can be made at all.
    let lowestFree = dup(0)
    guard lowestFree >= 0 else { fail("dup") }
    close(lowestFree)
    var lowered = original
    lowered.rlim_cur = rlim_t(lowestFree)
    guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &lowered) == 0 else { fail("setrlimit: \(String(cString: strerror(errno)))") }
    say("RLIMIT_NOFILE lowered from \(original.rlim_cur) to \(lowered.rlim_cur)")

    var failures: [String] = []
    // A local port holds no descriptor: it is made, and carries a message between threads,
    // with no descriptor number left.
    do {
        let local = try MessagePort()
        let got = Box<[UInt32]>([])
        local.setHandler { message in got.update { $0.append(message.msgid) } }
        receiverThread.runLoop.add(local, forMode: .default)
        try local.send(msgid: 7, timeout: .seconds(10))
        if waitUntil(.seconds(10), { got.value == [7] }) {
            say("MessagePort() needs no descriptor: delivered in-process")
        } else {
            failures.append("a port made with no descriptor left did not deliver")
        }
        local.invalidate()
    } catch {
        failures.append("MessagePort() threw \(error) with no descriptor left; it needs none")
    }
    do {
        let right = try port.makeSendRight()
        close(right)
        failures.append("makeSendRight() succeeded with no descriptor numbers left")
    } catch {
        say("makeSendRight() threw \(error)")
        if error != .resourceExhausted(errno: EMFILE) { failures.append("makeSendRight() threw \(error), expected resourceExhausted(errno: EMFILE)") }
    }
    // A port component (the proxy's own descriptor: nothing to create on the sending side).
    do {
        try sender!.send(msgid: 2, components: [.port(component), .data(Data("x".utf8))], timeout: .seconds(10))
        say("sent msgid=2 with a port component")
    } catch {
        failures.append("sending msgid 2 threw \(error)")
    }
    let reported = waitUntil(.seconds(10)) { !errors.value.isEmpty }
    say("transport errors: \(errors.value)")
    if !reported {
        failures.append("no transport error within 10 s")
    } else if errors.value.first != .resourceExhausted(errno: EMFILE) {
        failures.append("transport error \(errors.value), expected [resourceExhausted(errno: EMFILE)]")
    }
    guard setrlimit(__rlimit_resource_t(RLIMIT_NOFILE.rawValue), &original) == 0 else { fail("restoring RLIMIT_NOFILE failed") }
    say("RLIMIT_NOFILE restored")

    if delivered.value != [1] { failures.append("delivered \(delivered.value), expected only [1]") }
    if port.statistics.discarded != 1 { failures.append("discarded \(port.statistics.discarded), expected 1") }
    // The sender keeps its connection…
    do {
        try sender!.send(msgid: 3, components: [.port(component)], timeout: .seconds(10))
        say("the connection is kept")
    } catch {
        failures.append("send on the kept connection threw \(error)")
    }
    if !waitUntil(.seconds(10), { delivered.value == [1, 3] }) {
        failures.append("after restoring: delivered \(delivered.value), expected [1, 3]")
    }
    // …and the port itself works.
    do {
        let fresh = proxy(try port.makeSendRight())
        try fresh.send(msgid: 4, components: [.port(component)], timeout: .seconds(10))
    } catch {
        failures.append("the port does not work after the limit was restored: \(error)")
    }
    if !waitUntil(.seconds(10), { delivered.value == [1, 3, 4] }) {
        failures.append("after restoring: delivered \(delivered.value), expected [1, 3, 4]")
    }
    // Release every proxy made since the baseline (`fresh` and the ones delivered with msgids 3
    // and 4 are gone already); once the port has seen their connections close, the process holds
    // exactly the descriptors it held at the baseline.
    sender = nil
    if !waitUntil(.seconds(10), { port.connectionCount == 0 }) {
        failures.append("connections left after every sender closed: \(port.connectionCount)")
    }
    let after = openDescriptorCount()
    say("descriptors at the baseline \(baseline), at the end \(after)")
    if after != baseline {
        let table = descriptorTable()
        let added = table.filter { baselineTable[$0.key] != $0.value }.sorted { $0.key < $1.key }
        let removed = baselineTable.filter { table[$0.key] != $0.value }.sorted { $0.key < $1.key }
        failures.append("descriptor count \(after) at the end, \(baseline) at the baseline; new: \(added), gone: \(removed)")
    }
    receiverThread.stop()
    if !failures.isEmpty { fail(failures.joined(separator: "; ")) }
    say("exhaust ok")
    exit(0)
}

func waitUntil(_ timeout: Duration, _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        usleep(2_000)
    }
    return true
}

/// Open descriptors and what they refer to (readlink of /proc/self/fd/N).
func descriptorTable() -> [Int32: String] {
    guard let directory = opendir("/proc/self/fd") else { return [:] }
    var numbers: [Int32] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if let number = Int32(name) { numbers.append(number) }
    }
    closedir(directory)
    var table: [Int32: String] = [:]
    for number in numbers {
        var buffer = [CChar](repeating: 0, count: 256)
        let count = readlink("/proc/self/fd/\(number)", &buffer, 255)
        if count > 0 { table[number] = String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
    }
    return table
}

func openDescriptorCount() -> Int {
    guard let directory = opendir("/proc/self/fd") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while readdir(directory) != nil { count += 1 }
    return count - 3  // ".", ".." and the directory's own descriptor
}

// MARK: - main

runMode()

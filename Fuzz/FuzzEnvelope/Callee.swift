#if canImport(Glibc)
import Glibc
#endif
import Dispatch
import Distributed
import FoundationEssentials
import FuzzSupport
import RunLoopKit
import RunLoopKitDistributed

/// The actor the fuzzed calls reach: a few functions of the kinds a call can name (plain,
/// throwing, generic, void), and a second type whose functions must never run on it.
distributed actor FuzzActor {
    typealias ActorSystem = PortActorSystem
    distributed func twice(_ value: Int) -> Int { value &* 2 }
    distributed func greet(_ name: String, times: Int) -> String { String(repeating: name, count: max(0, min(times, 4))) }
    distributed func echo<Value: Codable & Sendable>(_ value: Value) -> Value { value }
    distributed func fail(_ code: Int) throws { throw FuzzError(code: code) }
    distributed func nothing() {}
}

distributed actor OtherFuzzActor {
    typealias ActorSystem = PortActorSystem
    var text = "other"
    distributed func twice(_ value: Int) -> Int { text.count &* value }
}

struct FuzzError: Error, Codable {
    var code: Int
}

/// A system publishing a `FuzzActor`, and a session with it opened by hand, as a hostile
/// caller would (distributed-envelope.md §2). Replies and the session's hang-up are seen on a
/// resident thread's loop.
final class Callee: @unchecked Sendable {
    static let shared = Callee()

    let system = PortActorSystem()
    let name = "rlk-fuzz-envelope-\(getpid())"
    let thread = ResidentThread(name: "fuzz callee")
    let replies: MessagePort
    private let answered = DispatchSemaphore(value: 0)
    private let answers = Inbox<MessagePort.Message>()
    private var session: MessagePort?

    private init() {
        do {
            try system.publish(FuzzActor(actorSystem: system), as: name)
            replies = try MessagePort()
        } catch {
            fuzzFailure("publishing the fuzzed actor: \(error)")
        }
        // Keep the other type alive in the binary and in the process.
        _ = OtherFuzzActor(actorSystem: system)
        replies.setHandler { [answers, answered] message in
            answers.append(message)
            answered.signal()
        }
        thread.runLoop.add(replies, forMode: .default)
        // A session, and the call `open` makes on it, before the first input: what the process
        // makes once, on first use (the concurrency runtime's threads, libdispatch's epoll and
        // timerfd), is then there before any input's descriptors are counted.
        _ = open()
    }

    /// Sends `envelope` on the session and checks the callee's response to it.
    func receive(_ envelope: [UInt8], decoded: Envelope?) {
        let session = self.session ?? open()
        let before = openDescriptors()
        do {
            try session.send(msgid: 0, components: [.data(Data(envelope))], timeout: .seconds(10))
        } catch PortError.messageTooLarge {
            return  // more than one frame holds: it never leaves this side
        } catch {
            fuzzFailure("sending on the session: \(error)")
        }
        guard case .call(let callID, _, _, _)? = decoded else {
            // Anything but a CALL closes the session, with no answer.
            waitUntil("the callee to close the session") { !session.isValid }
            if let stray = answers.take().first { fuzzFailure("a \(envelope.count)-byte non-CALL was answered: \(stray)") }
            self.session = nil
            return
        }
        guard answered.wait(timeout: .now() + 10) == .success else { fuzzFailure("no answer to CALL \(callID)") }
        let answer = answers.take()
        guard answer.count == 1, let data = answer[0].data(at: 0), answer[0].data(at: 1) == nil,
              let reply = try? Envelope.decode(data) else {
            fuzzFailure("CALL \(callID) got \(answer) instead of one envelope")
        }
        switch reply {
        case .returned(callID, _), .threw(callID, _, _), .failed(callID, _, _): break
        default: fuzzFailure("CALL \(callID) was answered with \(reply)")
        }
        guard session.isValid else { fuzzFailure("a valid CALL closed the session") }
        // The call's task and its reply hold nothing once answered. A descriptor of an earlier
        // session may close meanwhile: that session's teardown ends on the callee's loop, after
        // this side saw it hang up.
        let deadline = ContinuousClock.now + .seconds(10)
        while !openDescriptors().isSubset(of: before) {
            guard ContinuousClock.now < deadline else {
                return expectNoDescriptorLeak(since: before.intersection(openDescriptors()), after: "CALL \(callID)")
            }
            usleep(100)
        }
    }

    /// Opens a session by hand: HELLO on the published port, WELCOME with the session port.
    private func open() -> MessagePort {
        let entrance: MessagePort
        do {
            entrance = try MessagePort.connect(to: name)
            defer { entrance.invalidate() }
            let hello = try Envelope.hello(callID: 1).encoded()
            try entrance.send(msgid: 0, components: [.data(hello)], from: replies, timeout: .seconds(10))
        } catch {
            fuzzFailure("opening a session: \(error)")
        }
        guard answered.wait(timeout: .now() + 10) == .success, let welcome = answers.take().first,
              let port = welcome.port(at: 1) else { fuzzFailure("no WELCOME") }
        thread.runLoop.add(port, forMode: .default)
        // One valid CALL before any input's: the callee pins the session's caller with a pidfd
        // on its first frame, and holds it as long as the session (not a descriptor per call).
        do {
            let warmUp = try Envelope.call(callID: 1, target: Self.twice, substitutions: [], arguments: [Array("1".utf8)])
            try port.send(msgid: 0, components: [.data(try warmUp.encoded())], timeout: .seconds(10))
        } catch {
            fuzzFailure("the warm-up call on a new session: \(error)")
        }
        guard answered.wait(timeout: .now() + 10) == .success, answers.take().count == 1 else {
            fuzzFailure("no answer to the warm-up call on a new session")
        }
        session = port
        return port
    }

    static let twice = "$s12FuzzEnvelope0A5ActorC5twiceyS2iYaKFTE"

    private func waitUntil(_ what: String, _ condition: () -> Bool) {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { fuzzFailure("timed out waiting for \(what)") }
            usleep(100)
        }
    }
}

// Guarantees §3.38, one test per clause, each across two processes: this one and a
// DistributedPeer that publishes actors (or calls the ones this process publishes).

import Distributed
import DistributedPeer
import Glibc
import RunLoopKit
import RunLoopKitDistributed
import Testing

@Suite("§3.38 distributed actors over named ports", .timeLimit(.minutes(2)))
struct DistributedCallTests {
    @Test("§3.38 a published actor is callable from another process by name")
    func callableByName() async throws {
        let prefix = uniquePrefix("byname")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(__isRemoteActor(store))
        try await store.put("k", "v")
        #expect(try await store.get("k") == "v")
        #expect(try await store.get("other") == nil)
        #expect(try await store.twice(21) == 42)
        // A generic target: its substitution travels by mangled name.
        #expect(try await store.echo([1, 2, 3]) == [1, 2, 3])
        #expect(try await store.echo("a/b \"c\"") == "a/b \"c\"")
        // The peer that answered is the one this test started.
        let control = try Control.resolve(id: .named(prefix + ".control"), using: system)
        #expect(try await control.pid() == peer.pid)
    }

    @Test("§3.38 results and thrown errors come back; an error that is not Codable arrives as .remoteCallFailed with its description")
    func resultsAndErrors() async throws {
        let prefix = uniquePrefix("errors")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        try await store.put("present", "here")
        #expect(try await store.fetch("present") == "here")
        let codable = await thrownError { try await store.fetch("absent") }
        #expect(codable as? StoreError == StoreError(missingKey: "absent"))
        let plain = await thrownError { try await store.failPlainly("no codable") }
        #expect(plain as? PortActorSystemError == .remoteCallFailed(String(describing: PlainError(text: "no codable"))))
        withExtendedLifetime(peer) {}
    }

    @Test("§3.38 PortActorSystem.caller inside the call is the caller's kernel-verified sender")
    func callerIsTheSender() async throws {
        let prefix = uniquePrefix("caller")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        let seen = try #require(try await store.caller())
        #expect(seen == CallerInfo(MessagePort.Sender(pid: getpid(), uid: geteuid(), gid: getegid())))
        // A call within this process has no caller: it is direct.
        let local = Store(actorSystem: system)
        #expect(try await local.caller() == nil)
        withExtendedLifetime(peer) {}
    }

    @Test("§3.38 publish's access policy applies (.accessDenied)")
    func accessPolicyApplies() async throws {
        let prefix = uniquePrefix("access")
        // The peer's store admits one uid only, not this process's.
        let peer = try await PeerProcess.serving(prefix, onlyUID: geteuid() &+ 4242)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let refused = try Store.resolve(id: .named(prefix + ".store"), using: system)
        let error = await thrownError { try await refused.twice(1) }
        #expect(error as? PortError == .accessDenied)
        // Its other actors admit this user (the default, `.sameUser`).
        let admitted = try Control.resolve(id: .named(prefix + ".control"), using: system)
        #expect(try await admitted.pid() == peer.pid)
    }

    @Test("§3.38 a call whose callee process dies fails with .peerTerminated within a second")
    func calleeDeathIsPeerTerminated() async throws {
        let prefix = uniquePrefix("death")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        // A timeout far beyond the hang guard: the call can only end early by noticing the death.
        system.callTimeout = .seconds(600)
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(try await store.twice(1) == 2)
        let error = await thrownError { try await store.die() }
        #expect(error as? PortActorSystemError == .peerTerminated)
        #expect(await peer.exitStatus() == 128 + SIGKILL)
    }

    @Test("§3.38 a call whose callee process is killed while it runs fails with .peerTerminated within a second")
    func calleeKilledMidCallIsPeerTerminated() async throws {
        let prefix = uniquePrefix("killed")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        // As above: only noticing the death can end the call before the hang guard.
        system.callTimeout = .seconds(600)
        let gate = try Gate.resolve(id: .named(prefix + ".gate"), using: system)
        let opener = try Opener.resolve(id: .named(prefix + ".opener"), using: system)
        async let blocked = thrownError { try await gate.waitBlocking() }
        // The gate's call is running in the callee (it blocks there) when the process is killed.
        while try await !opener.isGateWaiting() {}
        kill(peer.pid, SIGKILL)
        #expect(await blocked as? PortActorSystemError == .peerTerminated)
        #expect(await peer.exitStatus() == 128 + SIGKILL)
    }

    @Test("§3.38 a call unanswered for callTimeout fails with .callTimedOut")
    func unansweredCallTimesOut() async throws {
        let prefix = uniquePrefix("timeout")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(try await store.twice(2) == 4)
        system.callTimeout = .milliseconds(300)
        let error = await thrownError { try await store.hang() }
        #expect(error as? PortActorSystemError == .callTimedOut)
        // The session outlives the timeout: the next call is answered.
        system.callTimeout = .seconds(60)
        #expect(try await store.twice(3) == 6)
        withExtendedLifetime(peer) {}
    }

    @Test("§3.38 calls made one after another from one task run in that order")
    func callsFromOneTaskRunInOrder() async throws {
        let prefix = uniquePrefix("order")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        let pinned = try PinnedStore.resolve(id: .named(prefix + ".pinned"), using: system)
        for entry in 0..<200 {
            try await store.append(entry)
            try await pinned.append(entry)
        }
        #expect(try await store.entries() == Array(0..<200))
        #expect(try await pinned.entries() == Array(0..<200))
        withExtendedLifetime(peer) {}
    }

    @Test("§3.38 an unpublished or unknown name gives .actorNotFound")
    func unpublishedOrUnknownNameIsActorNotFound() async throws {
        let prefix = uniquePrefix("notfound")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let unknown = try Store.resolve(id: .named(prefix + ".nobody"), using: system)
        let unknownError = await thrownError { try await unknown.twice(1) }
        #expect(unknownError as? PortActorSystemError == .actorNotFound(prefix + ".nobody"))

        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(try await store.twice(1) == 2)
        let control = try Control.resolve(id: .named(prefix + ".control"), using: system)
        try await control.unpublish(prefix + ".store")
        let unpublishedError = await thrownError { try await store.twice(1) }
        #expect(unpublishedError as? PortActorSystemError == .actorNotFound(prefix + ".store"))
        withExtendedLifetime(peer) {}
    }
}

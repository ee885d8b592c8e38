// Where a published actor runs: on its own executor, with the calls of another process.

import Distributed
import DistributedPeer
import Glibc
import RunLoopKit
import RunLoopKitDistributed
import Testing

@Suite("Distributed actors: where a published actor's calls run", .timeLimit(.minutes(2)))
struct ExecutorTests {
    @Test("a default actor runs its calls on its own executor, not on the system's thread")
    func defaultActorRunsOnItsOwnExecutor() async throws {
        let prefix = uniquePrefix("default")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let store = try Store.resolve(id: .named(prefix + ".store"), using: system)
        #expect(try await store.threadName() != "PortActorSystem")
        // The gate's call blocks the thread it runs on until the opener's call arrives. Were
        // calls run on the thread that reads them, the opener's could never be read.
        let gate = try Gate.resolve(id: .named(prefix + ".gate"), using: system)
        let opener = try Opener.resolve(id: .named(prefix + ".opener"), using: system)
        async let opened = gate.waitBlocking()
        // Calls keep being answered while the gate's call holds a thread; then it is opened.
        while try await !opener.isGateWaiting() {
            #expect(try await store.twice(1) == 2)
        }
        try await opener.open()
        #expect(try await opened)
        withExtendedLifetime(peer) {}
    }

    @Test("an actor pinned to a resident thread runs its calls on that thread")
    func pinnedActorRunsOnItsThread() async throws {
        let prefix = uniquePrefix("pinned")
        let peer = try await PeerProcess.serving(prefix)
        let system = PortActorSystem()
        defer { system.shutdown() }
        let pinned = try PinnedStore.resolve(id: .named(prefix + ".pinned"), using: system)
        for _ in 0..<3 {
            #expect(try await pinned.whereAmI() == ["pinned-store", "isolated"])
        }
        withExtendedLifetime(peer) {}
    }
}

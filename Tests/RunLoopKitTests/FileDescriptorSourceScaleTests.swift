// Many fd sources in one mode (a daemon's connections): each event reaches its own source.

import Glibc
import RunLoopKit
import Testing

@Suite("FileDescriptorSource at scale")
struct FileDescriptorSourceScaleTests {
    @Test("with 500 fd sources in a mode, the events of a scattered 100 of them reach exactly those sources, each once per readiness")
    func eventsReachTheirOwnSources() throws {
        let count = 500
        let descriptors = (0..<count).map { _ in makeEventFD() }
        defer { descriptors.forEach { close($0) } }
        let ready = Set((0..<100).map { ($0 * 37 + 11) % count })
        let seen = try #require(onLoopThread { loop -> [Int] in
            let seen = Recorder<Int>()
            let sources = descriptors.enumerated().map { index, fd in
                FileDescriptorSource(fileDescriptor: fd, events: .readable) { _, _ in
                    _ = drainEventFD(fd)
                    seen.append(index)
                }
            }
            for source in sources { loop.add(source, forMode: .default) }
            for index in ready { writeEventFD(descriptors[index]) }
            while seen.count < ready.count {
                guard loop.run(mode: .default, for: longRun, returnAfterSourceHandled: true) == .handledSource else { break }
            }
            // Nothing else is ready: the next run sleeps until its deadline.
            _ = loop.run(mode: .default, for: .milliseconds(100), returnAfterSourceHandled: true)
            sources.forEach { $0.invalidate() }
            return seen.values
        })
        #expect(seen.count == ready.count)
        #expect(Set(seen) == ready)
    }
}

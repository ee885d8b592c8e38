// PortPeer's mode for the descriptor-refusal test (RunLoopKitTransportTests/PortRefusalTests,
// Guarantees §3.34), public API only:
//
//   refuse-ports <count>   owns a port with acceptsPortComponents false on its loop and sends it,
//                          <count> times each: a port component in-process, a port component and
//                          a reply port through a send right to it (its own proxy), then a Data
//                          message through the send right. Prints "refused <n> delivered <m>",
//                          and "descriptors <before> <after>": /proc/self/fd before the first send
//                          and once every message and component is gone (alone in its process,
//                          the count is exact).

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

func refusePorts() -> Never {
    guard let count = Int(argument(2)) else { fail("refuse-ports <count>") }
    let loop = ThreadRunLoop.current
    let port = makeLocalPort()
    let delivered = Box(0)
    let reported = Box<[PortError]>([])
    port.setHandler { _ in delivered.update { $0 += 1 } }
    port.setTransportErrorHandler { error in reported.update { $0.append(error) } }
    loop.add(port, forMode: .default)
    port.acceptsPortComponents = false
    let right: MessagePort
    do { right = proxy(try port.makeSendRight()) } catch { fail("makeSendRight threw \(error)") }
    // What exists once a first message went through is there before the count: the loop's
    // epoll set, and the pidfd of the process the send right's connection is pinned to.
    do { try right.send(msgid: 0, timeout: .seconds(10)) } catch { fail("the first message threw \(error)") }
    guard runLoop(for: .seconds(10), until: { delivered.value == 1 }) else { fail("the first message was not delivered") }
    delivered.value = 0
    let before = openDescriptorCount()
    var refused = 0
    for index in 0..<count {
        do {
            let component = makeLocalPort()
            for attempt in 0..<3 {
                do {
                    switch attempt {
                    case 0: try port.send(msgid: 1, components: [.port(component)], timeout: .seconds(10))
                    case 1: try right.send(msgid: 2, components: [.port(component)], timeout: .seconds(10))
                    default: try right.send(msgid: 3, from: component, timeout: .seconds(10))
                    }
                } catch {
                    guard error == .portsRefused else { fail("attempt \(attempt) threw \(error)") }
                    refused += 1
                }
            }
            component.invalidate()
        }
        do {
            try right.send(msgid: 4, components: [.data(Data("plain \(index)".utf8))], timeout: .seconds(10))
        } catch {
            fail("a message without ports threw \(error)")
        }
    }
    guard runLoop(for: .seconds(10), until: { delivered.value == count }) else {
        fail("delivered \(delivered.value) of \(count) plain messages")
    }
    guard reported.value.isEmpty else { fail("the owner reported \(reported.value)") }
    say("refused \(refused) delivered \(delivered.value)")
    say("descriptors \(before) \(openDescriptorCount())")
    exit(0)
}

#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKit

/// sealed-echo <fd>: §3.39–3.40 from the other side. Hands its own port to the parent's port at
/// <fd> (msgid 1, as the reply port), then sends every message it receives back unchanged —
/// its components as they arrived, so a sealed Data is forwarded — with one more DATA
/// component saying how each Data arrived: "COUNT sealed=BOOL map=PERMS:INODE:PATH", joined by
/// ";". msgid 0 ends it.
func sealedEcho() {
    let parent = proxy(descriptorArgument(2))
    let own = makeLocalPort()
    own.maximumIncomingDataSize = 1 << 31
    let received = Box<[MessagePort.Message]>([])
    own.setHandler { message in received.update { $0.append(message) } }
    ThreadRunLoop.current.add(own, forMode: .default)
    do { try parent.send(msgid: 1, components: [], from: own, timeout: .seconds(10)) } catch {
        fail("sending the port to the parent threw \(error)")
    }
    while true {
        guard runLoop(for: .seconds(60), until: { !received.value.isEmpty }) else { fail("no message within 60 s") }
        var batch: [MessagePort.Message] = []
        received.update { swap(&$0, &batch) }
        for message in batch {
            if message.msgid == 0 {
                own.invalidate()
                return
            }
            let report = message.components.compactMap { component -> String? in
                guard case .data(let data) = component else { return nil }
                return "\(data.count) sealed=\(SealedMemory.contains(data)) map=\(mapping(of: data) ?? "none")"
            }.joined(separator: ";")
            do {
                try parent.send(msgid: message.msgid, components: message.components + [.data(Data(report.utf8))],
                                timeout: .seconds(30))
            } catch {
                fail("echoing msgid \(message.msgid) threw \(error)")
            }
        }
    }
}

/// The mapping of /proc/self/maps that holds `data`'s first byte, as "PERMS:INODE:PATH", or nil.
func mapping(of data: Data) -> String? {
    let address: UInt = data.withUnsafeBytes { UInt(bitPattern: $0.baseAddress) }
    guard address != 0, let file = fopen("/proc/self/maps", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 4096)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fields = text.split(separator: " ", maxSplits: 5, omittingEmptySubsequences: true)
        guard fields.count >= 5 else { continue }
        let range = fields[0].split(separator: "-")
        guard range.count == 2, let low = UInt(range[0], radix: 16), let high = UInt(range[1], radix: 16),
              low <= address, address < high else { continue }
        let path = fields.count > 5 ? fields[5].trimmingPrefix { $0 == " " } : ""
        return "\(fields[1]):\(fields[4]):\(path)"
    }
    return nil
}

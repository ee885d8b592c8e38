#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import Synchronization

/// Data of any size across processes (Protocols/port-message-frame.md §3.5): a `.data`
/// component larger than `inlineDataLimit` travels as a MEMORY component, a sealed memfd whose
/// descriptor goes with the frame, and arrives as a Data over a read-only mapping of it.
extension MessagePort {
    /// Data components up to this many bytes travel inside the frame; larger ones as sealed
    /// memory (``SealedMemory``). 65,512 bytes, all a frame holds beside its header and one
    /// table entry: at every size a frame can carry, copying the bytes through the socket costs
    /// less than making, sealing, passing and mapping a memfd (about ten system calls and a page
    /// fault per 4 KiB page touched) — the bisection of the Benchmarks' `xlarge` workload measured
    /// a 64 KiB Data inline at 17 µs a round trip, as sealed memory 39 µs when the sender made it
    /// so and 42 µs when the transport copied it in. When several components together would
    /// not fit a frame, those that do not fit travel as memory too. Any thread; free.
    public static var inlineDataLimit: Int { 65_512 }

    /// The limit this process's sends apply: ``inlineDataLimit``, unless the benchmarks' bisection
    /// of it (Benchmarks, `xlarge`) moved it, to time both encodings of one size in one process
    /// (from 0, everything as sealed memory, up to the largest Data one frame holds, 65,512 bytes:
    /// the single-Data send takes the inline path up to this limit without checking the frame).
    /// Nothing else sets it. A relaxed load per send.
    package static let appliedInlineDataLimit = Atomic<Int>(inlineDataLimit)

    /// The most bytes of Data one message from another process may bring to this port, all its
    /// components together (inline and in sealed memory). Default 1 GiB. A frame over it costs
    /// its sender the connection, which is reported as `.messageTooLarge(limit:)` through the
    /// transport report handler; nothing of it is delivered. Messages sent in this process are
    /// not limited (they are not copied).
    ///
    /// Only a local port receives from other processes: setting it on a proxy, or to a negative
    /// value, is a precondition failure. Any thread; an atomic load or store.
    public var maximumIncomingDataSize: Int {
        get { state.incomingData.maximum.load(ordering: .relaxed) }
        set {
            precondition(!isProxy, """
                MessagePort.maximumIncomingDataSize was set on a proxy (\(self)): only the process that \
                owns a port limits what reaches it; set it on the local port there.
                """)
            precondition(newValue >= 0, "MessagePort.maximumIncomingDataSize was set to \(newValue): a size cannot be negative.")
            state.incomingData.maximum.store(newValue, ordering: .relaxed)
        }
    }

    /// `.messageTooLarge` when a received frame brings more Data than this port takes.
    func checkIncomingDataSize(_ total: Int) throws(PortError) {
        let limit = state.incomingData.maximum.load(ordering: .relaxed)
        guard total <= limit else { throw .messageTooLarge(limit: limit) }
    }
}

/// A port's limit on the Data a message from another process brings: read for every frame
/// without the port's lock.
final class IncomingDataLimit: Sendable {
    let maximum = Atomic<Int>(1 << 30)
}

/// The components of a frame to send, with its descriptors: each `.data` component inline or
/// as MEMORY, and the memfds made for the Data that was not sealed memory yet.
struct OutgoingFrame: ~Copyable {
    enum Component: FrameComponent {
        case inline(Data)
        case port
        case memory(Int)

        var frameDataLength: Int? {
            if case .inline(let data) = self { data.count } else { nil }
        }

        var frameMemoryLength: Int? {
            if case .memory(let length) = self { length } else { nil }
        }

        func copyFrameData(into destination: UnsafeMutableRawBufferPointer) {
            if case .inline(let data) = self { data.withUnsafeBytes { destination.copyMemory(from: $0) } }
        }
    }

    var components: [Component] = []
    /// One per PORT and MEMORY component, in table order (the caller appends the reply port's).
    /// Not owned, but for those in `made`.
    var descriptors: [Int32] = []
    /// The memfds this frame made; closed by `closeMadeMemory` once it is sent (the kernel holds
    /// its own reference to each while the frame is in flight).
    private var made: [MemoryFile] = []

    /// A component that fits goes inline while it is at most `inlineDataLimit`; the others as
    /// memory: the Data's own when it is sealed memory starting at its first byte, else a copy.
    init(_ components: [MessagePort.Message.Component]) throws(PortError) {
        guard components.count <= PortFrame.maximumComponents else { throw .messageTooLarge(limit: PortFrame.maximumFrameSize) }
        var room = PortFrame.maximumFrameSize - PortFrame.headerSize - PortFrame.componentEntrySize * components.count
        do throws(PortError) {
            for component in components {
                switch component {
                case .port(let port):
                    self.components.append(.port)
                    descriptors.append(try port.transferableDescriptor())
                case .data(let data) where data.count <= MessagePort.appliedInlineDataLimit.load(ordering: .relaxed) && data.count <= room:
                    self.components.append(.inline(data))
                    room -= data.count
                case .data(let data):
                    self.components.append(.memory(data.count))
                    descriptors.append(try memoryDescriptor(for: data))
                }
            }
        } catch {
            closeMadeMemory()
            throw error
        }
    }

    /// The memfd to send for `data` (not empty): its own, or a new one holding a copy.
    private mutating func memoryDescriptor(for data: Data) throws(PortError) -> Int32 {
        let own: Int32? = data.withUnsafeBytes { bytes in
            // A receiver maps a memfd from its first byte: a Data from further in is copied.
            guard let region = SealedRegions.region(containing: bytes.baseAddress!, count: bytes.count),
                  region.start == UInt(bitPattern: bytes.baseAddress!) else { return nil }
            return region.file.descriptor.rawValue
        }
        if let own { return own }
        // Copied in with pwrite(2), not through a mapping: no page fault per page, and no
        // writable mapping to remove before the seals.
        let file: MemoryFile
        do { file = try MemoryFile.make(size: data.count) } catch { throw .resourceExhausted(errno: error.rawValue) }
        do throws(Errno) {
            let written = data.withUnsafeBytes { bytes in Result { () throws(Errno) in try file.write(bytes) } }
            try written.get()
            try file.seal()
        } catch {
            file.close()
            throw .resourceExhausted(errno: error.rawValue)
        }
        made.append(file)
        return file.descriptor.rawValue
    }

    mutating func closeMadeMemory() {
        for file in made { file.close() }
        made = []
    }
}

/// The descriptors of a received frame, checked and taken over: its PORT components' and reply
/// port's sockets, and its MEMORY components as Data over read-only mappings.
struct IncomingAttachments {
    /// In table order, the reply port last.
    var sockets: [SeqPacketSocket] = []
    /// In table order.
    var memory: [Data] = []

    /// Checks every descriptor in table order (spec §5.4: D1 for a port, M1–M3 for memory)
    /// before it maps anything; on failure nothing is mapped or owned.
    init(_ descriptors: [FileDescriptor], of reader: FrameReader) throws(PortError) {
        // Each descriptor's MEMORY length, or nil for a port.
        var lengths: [Int?] = []
        lengths.reserveCapacity(descriptors.count)
        reader.forEachComponent { entry in
            switch entry {
            case .data: break
            case .port: lengths.append(nil)
            case .memory(let length): lengths.append(length)
            }
        }
        if reader.hasReplyPort { lengths.append(nil) }
        var files: [(file: MemoryFile, length: Int)] = []
        for (descriptor, length) in zip(descriptors, lengths) {
            guard let length else {
                guard let socket = try? SeqPacketSocket(adopting: descriptor) else { throw .malformedFrame(.descriptorNotAPort) }
                sockets.append(socket)
                continue
            }
            switch MemoryFile.inspect(descriptor) {
            case .notMemory: throw .malformedFrame(.descriptorNotMemory)
            case .unsealed: throw .malformedFrame(.memoryNotSealed)
            case .sealed(let size): guard size >= length else { throw .malformedFrame(.memoryTooSmall) }
            }
            files.append((MemoryFile(descriptor: descriptor), length))
        }
        var mapped: [UnsafeRawPointer] = []
        for (file, length) in files {
            do throws(Errno) {
                mapped.append(try file.mapReadOnly(length: length))
            } catch {
                for (address, (_, length)) in zip(mapped, files) { MemoryFile.unmap(address, length: length) }
                throw .resourceExhausted(errno: error.rawValue)
            }
        }
        memory = zip(mapped, files).map { SealedRegions.data(over: $0, length: $1.length, of: $1.file) }
    }
}

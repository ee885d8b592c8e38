#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// Data in sealed memory: a memfd sealed with `F_SEAL_WRITE`, `F_SEAL_SHRINK` and
/// `F_SEAL_GROW`, mapped read-only. No process, this one included, can change its bytes or size
/// any more, so it can be handed to another process as it is — the descriptor travels, not the
/// bytes — like Mach out-of-line memory or Mojo's shared buffers.
///
/// A `.data` component larger than ``MessagePort/inlineDataLimit`` crosses processes as sealed
/// memory whatever its storage: Data made here crosses without a copy, any other Data is copied
/// once into new sealed memory on the sending side. The receiver gets a `Data` over its own
/// read-only mapping of the same memory, which nothing copied, and which it can send on without
/// a copy either.
///
/// The memory is charged to the memory cgroup of the process that wrote it, for as long as any
/// process maps it or holds its descriptor.
public enum SealedMemory {
    /// A Data of `count` bytes, written once by `initializer` (which gets them zero-filled) and
    /// then sealed read-only. Sent to another process it is passed, not copied, when larger
    /// than ``MessagePort/inlineDataLimit`` (smaller components travel inside the frame).
    ///
    /// `count` 0 gives an empty Data, which is no memory at all: ``contains(_:)`` is false for it.
    /// So is it for a Data of at most 14 bytes, which Foundation keeps in the value itself.
    ///
    /// Throws ``PortError/resourceExhausted(errno:)`` when the memory cannot be made (out of
    /// descriptors, memory, or the memory cgroup's limit), and what `initializer` throws.
    /// Any thread; a memfd_create(2), an ftruncate(2), two mmap(2), a munmap(2) and an fcntl(2),
    /// and a lock; the memory is unmapped and its descriptor closed when the last copy of the
    /// Data goes. A negative `count` is a precondition failure.
    public static func data(count: Int, initializingWith initializer: (UnsafeMutableRawBufferPointer) throws -> Void) throws -> Data {
        precondition(count >= 0, "SealedMemory.data(count:initializingWith:) was asked for \(count) bytes: a count cannot be negative.")
        guard count > 0 else {
            try initializer(UnsafeMutableRawBufferPointer(start: nil, count: 0))
            return Data()
        }
        let (file, writable) = try writableMemory(count: count)
        do {
            try initializer(UnsafeMutableRawBufferPointer(start: writable, count: count))
        } catch {
            MemoryFile.unmap(writable, length: count)
            file.close()
            throw error
        }
        try seal(file, writtenThrough: writable, count: count)
        let readable: UnsafeRawPointer
        do { readable = try file.mapReadOnly(length: count) } catch {
            file.close()
            throw PortError.resourceExhausted(errno: error.rawValue)
        }
        return SealedRegions.data(over: readable, length: count, of: file)
    }

    /// Whether `data`'s bytes lie in sealed memory: made by ``data(count:initializingWith:)``,
    /// or received from another process. Any thread; a lock and a binary search of the sealed
    /// memory this process maps.
    public static func contains(_ data: Data) -> Bool {
        data.withUnsafeBytes { bytes in
            guard let start = bytes.baseAddress, !bytes.isEmpty else { return false }
            return SealedRegions.region(containing: start, count: bytes.count) != nil
        }
    }

    /// A new sealable memfd of `count` bytes and a writable shared mapping of it, for the one
    /// write that fills it.
    static func writableMemory(count: Int) throws(PortError) -> (MemoryFile, UnsafeMutableRawPointer) {
        let file: MemoryFile
        do { file = try MemoryFile.make(size: count) } catch { throw .resourceExhausted(errno: error.rawValue) }
        do {
            return (file, try file.mapWritable(length: count))
        } catch {
            file.close()
            throw .resourceExhausted(errno: error.rawValue)
        }
    }

    /// Unmaps the writable mapping, then seals `file` (`F_SEAL_WRITE` refuses while a writable
    /// shared mapping exists). Closes `file` when it cannot be sealed.
    static func seal(_ file: MemoryFile, writtenThrough writable: UnsafeMutableRawPointer, count: Int) throws(PortError) {
        MemoryFile.unmap(writable, length: count)
        do throws(Errno) {
            try file.seal()
        } catch {
            file.close()
            throw .resourceExhausted(errno: error.rawValue)
        }
    }
}

/// The sealed memory this process maps, by address: what tells ``SealedMemory/contains(_:)``
/// and the transport that a Data's bytes are sealed memory, and which descriptor to send for
/// them. Each region keeps its memfd open until its Data's storage is freed.
enum SealedRegions {
    struct Region {
        let start: UInt
        let length: Int
        let file: MemoryFile
    }

    /// Sorted by `start`; mappings do not overlap.
    private static let regions = Locked<[Region]>([])

    /// A Data over `address`, a read-only mapping of the first `length` bytes of `file` (sealed),
    /// which it then owns: unmapped and closed when the Data's storage is freed.
    static func data(over address: UnsafeRawPointer, length: Int, of file: MemoryFile) -> Data {
        let region = Region(start: UInt(bitPattern: address), length: length, file: file)
        regions.withLock { regions in
            regions.insert(region, at: regions.partitionPoint { $0.start > region.start })
        }
        let start = region.start
        return Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: address), count: length, deallocator: .custom { address, _ in
            let removed = regions.withLock { regions -> Region? in
                guard let index = regions.firstIndex(where: { $0.start == start }) else { return nil }
                return regions.remove(at: index)
            }
            guard let removed else { return }
            MemoryFile.unmap(address, length: removed.length)
            removed.file.close()
        })
    }

    /// The region whose bytes include `count` bytes at `start`, or nil.
    static func region(containing start: UnsafeRawPointer, count: Int) -> Region? {
        let address = UInt(bitPattern: start)
        return regions.withLock { regions in
            // The last region starting at or before `address`.
            let index = regions.partitionPoint { $0.start > address } - 1
            guard index >= 0 else { return nil }
            let region = regions[index]
            return address - region.start + UInt(count) <= UInt(region.length) ? region : nil
        }
    }
}

extension Array {
    /// The index of the first element for which `isAfter` holds, in an array where it holds
    /// for a suffix.
    fileprivate func partitionPoint(where isAfter: (Element) -> Bool) -> Int {
        var low = 0
        var high = count
        while low < high {
            let middle = (low + high) / 2
            if isAfter(self[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }
}

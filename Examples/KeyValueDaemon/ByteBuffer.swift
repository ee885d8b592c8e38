#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials

/// A growable run of bytes in memory of its own (malloc), appended to at the end and consumed
/// from the front: a connection's unparsed input and unwritten output, a batch of requests or
/// replies being built. Noncopyable, so that the memory has exactly one owner; a finished batch
/// leaves as `Data` without a copy (`takeData()`).
///
/// Consuming from the front only moves an offset; the bytes left are moved down when the
/// buffer needs room at the end, so a stream of appends and partial consumes costs amortised
/// O(1) per byte. An empty buffer holds no memory.
struct ByteBuffer: ~Copyable {
    private(set) var base: UnsafeMutableRawPointer?
    /// Where the unconsumed bytes start.
    private(set) var start = 0
    /// Where they end (the next append goes here).
    private(set) var end = 0
    private(set) var capacity = 0

    init() {}

    init(capacity: Int) {
        reserveTail(capacity)
    }

    deinit {
        free(base)
    }

    /// The number of unconsumed bytes.
    var count: Int { end - start }
    var isEmpty: Bool { end == start }

    /// The unconsumed bytes (valid until the next mutation).
    var bytes: UnsafeRawBufferPointer {
        guard let base else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: base + start, count: end - start)
    }

    /// Makes room for at least `extra` more bytes at the end; returns where they go.
    @discardableResult
    mutating func reserveTail(_ extra: Int) -> UnsafeMutableRawPointer {
        if capacity - end < extra {
            if start > 0 && capacity - count >= extra && count <= capacity / 2 {
                // Enough room once the consumed front is reclaimed: move the rest down.
                memmove(base!, base! + start, count)
            } else {
                grow(toHold: count + extra)
            }
            end -= start
            start = 0
        }
        return base! + end
    }

    private mutating func grow(toHold needed: Int) {
        var newCapacity = max(capacity * 2, 64)
        while newCapacity < needed { newCapacity *= 2 }
        let fresh = malloc(newCapacity)!
        if let base {
            memcpy(fresh, base + start, count)
            free(base)
        }
        base = fresh
        capacity = newCapacity
    }

    /// Counts `n` bytes written at `reserveTail`'s pointer as appended.
    mutating func didAppend(_ n: Int) {
        end += n
    }

    /// The room left at the end without moving or growing.
    var tailRoom: Int { capacity - end }

    mutating func append(_ source: UnsafeRawBufferPointer) {
        guard source.count > 0 else { return }
        reserveTail(source.count).copyMemory(from: source.baseAddress!, byteCount: source.count)
        end += source.count
    }

    mutating func append(_ byte: UInt8) {
        reserveTail(1).storeBytes(of: byte, as: UInt8.self)
        end += 1
    }

    /// Appends a static ASCII string (a reply constant).
    mutating func append(_ text: StaticString) {
        append(UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    mutating func append(_ text: String) {
        var text = text
        text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
    }

    /// Appends a fixed-width integer in this machine's byte order (the batches between the
    /// daemon's own threads, never the network).
    mutating func append<T: FixedWidthInteger>(native value: T) {
        reserveTail(MemoryLayout<T>.size).storeBytes(of: value, as: T.self)
        end += MemoryLayout<T>.size
    }

    /// Appends `value` in decimal.
    mutating func append(decimal value: Int64) {
        let room = reserveTail(20)
        var digits = 0
        var magnitude = value.magnitude
        // Written backwards into a small stack array, then copied in order.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
            repeat {
                scratch[19 - digits] = UInt8(truncatingIfNeeded: magnitude % 10) + 48
                magnitude /= 10
                digits += 1
            } while magnitude > 0
            var offset = 0
            if value < 0 {
                room.storeBytes(of: UInt8(ascii: "-"), as: UInt8.self)
                offset = 1
            }
            (room + offset).copyMemory(from: scratch.baseAddress! + (20 - digits), byteCount: digits)
            end += offset + digits
        }
    }

    /// Overwrites `count` bytes at `offset` (from the start of the unconsumed bytes): a length
    /// field filled in once what it counts was appended.
    mutating func store<T: FixedWidthInteger>(native value: T, at offset: Int) {
        (base! + start + offset).storeBytes(of: value, toByteOffset: 0, as: T.self)
    }

    /// Drops `n` bytes from the front.
    mutating func consume(_ n: Int) {
        start += n
        if start == end {
            start = 0
            end = 0
        }
    }

    /// Drops everything; keeps the memory unless it is more than `keeping` bytes, so that a
    /// connection that once held a large value does not hold its memory for ever.
    mutating func removeAll(keeping limit: Int) {
        start = 0
        end = 0
        if capacity > limit {
            free(base)
            base = nil
            capacity = 0
        }
    }

    /// The bytes as `Data`, handing the memory over (no copy); the buffer is left empty.
    mutating func takeData() -> Data {
        guard let base, end > start else {
            start = 0
            end = 0
            return Data()
        }
        if start > 0 { memmove(base, base + start, end - start) }
        let data = Data(bytesNoCopy: base, count: end - start, deallocator: .free)
        self.base = nil
        start = 0
        end = 0
        capacity = 0
        return data
    }
}

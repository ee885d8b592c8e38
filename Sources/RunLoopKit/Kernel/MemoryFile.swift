#if canImport(Glibc)
import Glibc
#endif
import CRunLoopKit

/// A memfd: anonymous memory with a descriptor, which another process can map once it holds
/// the descriptor (SCM_RIGHTS). Sealed with `F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW`, no
/// process can change its bytes or its size any more, so a mapping of it can neither change
/// under its reader nor fault (SIGBUS) from a truncation.
struct MemoryFile: Sendable {
    let descriptor: FileDescriptor

    /// The seals that make a memfd immutable. `F_SEAL_FUTURE_WRITE` is not among them: it leaves
    /// a writable mapping made before it in place.
    static let immutableSeals: Int32 = Int32(CRLK_SEAL_WRITE) | Int32(CRLK_SEAL_SHRINK) | Int32(CRLK_SEAL_GROW)

    /// A new sealable memfd of `size` bytes (zero-filled, close-on-exec, not executable where
    /// the kernel knows MFD_NOEXEC_SEAL). Throws EMFILE, ENFILE, ENOMEM, ENOSPC, EFBIG.
    static func make(size: Int) throws(Errno) -> MemoryFile {
        let fd = try syscallRetryingEINTR { crlk_memfd_create_sealable("runloopkit-data") }
        let file = MemoryFile(descriptor: FileDescriptor(rawValue: fd))
        do {
            _ = try syscallRetryingEINTR { ftruncate(fd, off_t(size)) }
        } catch {
            file.descriptor.close()
            throw error
        }
        return file
    }

    /// Copies `bytes` into the file from its start, with pwrite(2): the kernel allocates each
    /// page as it fills it, about twice as fast for a fresh memfd as a mapping written through,
    /// which takes a page fault per page (16 MiB: 8.4 ms against 16.4 ms, measured). Throws
    /// ENOSPC, ENOMEM (a memory cgroup's limit).
    func write(_ bytes: UnsafeRawBufferPointer) throws(Errno) {
        var written = 0
        while written < bytes.count {
            // A single pwrite(2) moves at most about 2 GiB (MAX_RW_COUNT).
            let count = try syscallRetryingEINTR {
                pwrite(descriptor.rawValue, bytes.baseAddress! + written, bytes.count - written, off_t(written))
            }
            written += count
        }
    }

    /// Adds the immutable seals and `F_SEAL_SEAL`. Throws EBUSY while a writable shared mapping
    /// of it exists.
    func seal() throws(Errno) {
        _ = try syscallRetryingEINTR {
            crlk_memfd_add_seals(descriptor.rawValue, Self.immutableSeals | Int32(CRLK_SEAL_SEAL))
        }
    }

    /// What a descriptor received from another process is, as memory for a MEMORY component.
    enum Inspection: Equatable {
        /// A memfd sealed immutable (whatever other seals it has) of `size` bytes.
        case sealed(size: Int)
        /// A memfd lacking one of the immutable seals.
        case unsealed
        /// Not a memfd: a socket, a pipe, a regular file, a directory…
        case notMemory
    }

    /// Inspects a received descriptor: one fstat(2) and one fcntl(2). The seals are checked as a
    /// mask, so that seals added later (`F_SEAL_EXEC`, …) do not make a sealed memfd look unsealed.
    static func inspect(_ descriptor: FileDescriptor) -> Inspection {
        var status = stat()
        guard fstat(descriptor.rawValue, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { return .notMemory }
        // F_GET_SEALS fails (EINVAL) for every file that is not shmem: a memfd, here.
        let seals = crlk_memfd_get_seals(descriptor.rawValue)
        guard seals >= 0 else { return .notMemory }
        guard seals & immutableSeals == immutableSeals else { return .unsealed }
        return .sealed(size: Int(status.st_size))
    }

    /// Maps the first `length` bytes read-write and shared, for the one write that fills it
    /// before it is sealed. Throws ENOMEM.
    func mapWritable(length: Int) throws(Errno) -> UnsafeMutableRawPointer {
        try map(length: length, protection: PROT_READ | PROT_WRITE, flags: MAP_SHARED)
    }

    /// Maps the first `length` bytes read-only and private. Throws ENOMEM.
    func mapReadOnly(length: Int) throws(Errno) -> UnsafeRawPointer {
        UnsafeRawPointer(try map(length: length, protection: PROT_READ, flags: MAP_PRIVATE))
    }

    private func map(length: Int, protection: Int32, flags: Int32) throws(Errno) -> UnsafeMutableRawPointer {
        guard let address = mmap(nil, length, protection, flags, descriptor.rawValue, 0),
              address != MAP_FAILED else { throw Errno.current }
        return address
    }

    /// Unmaps what `mapWritable` or `mapReadOnly` returned.
    static func unmap(_ address: UnsafeRawPointer, length: Int) {
        _ = munmap(UnsafeMutableRawPointer(mutating: address), length)
    }

    func close() { descriptor.close() }
}

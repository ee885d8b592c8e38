#if canImport(Glibc)
import Glibc
#endif

/// The numbers of the descriptors this process holds open, from /proc/self/fd (without the
/// one the listing itself uses). A fuzz target compares them before and after each input.
public func openDescriptors() -> Set<Int32> {
    guard let directory = opendir("/proc/self/fd") else { fuzzFailure("cannot list /proc/self/fd") }
    let own = dirfd(directory)
    var numbers: Set<Int32> = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        if let number = Int32(name), number != own { numbers.insert(number) }
    }
    closedir(directory)
    return numbers
}

/// Fails unless the process holds exactly the descriptors of `before`: a descriptor received
/// from a hostile peer and never closed shows up here, named by what it is.
public func expectNoDescriptorLeak(since before: Set<Int32>, after input: String) {
    let now = openDescriptors()
    guard now != before else { return }
    let leaked = now.subtracting(before).sorted().map { "\($0) → \(target(of: $0))" }
    let lost = before.subtracting(now).sorted()
    fuzzFailure("\(input): descriptors leaked \(leaked), closed that were not ours \(lost)")
}

private func target(of descriptor: Int32) -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    let n = readlink("/proc/self/fd/\(descriptor)", &buffer, buffer.count - 1)
    return n > 0 ? String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
}

#if canImport(Glibc)
import Glibc
#endif

/// The text of the file at `path`, or nil when it cannot be read.
package func readText(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        if n <= 0 { break }
        bytes.append(contentsOf: buffer[0..<n])
    }
    return String(decoding: bytes, as: UTF8.self)
}

/// A file of this package by its path from the package root (found from this source file's
/// place, Tests/PackageTestSupport/), or nil when it cannot be read.
package func readPackageFile(_ relativePath: String) -> String? {
    var root = #filePath
    for _ in 0..<3 { root = String(root[..<(root.lastIndex(of: "/") ?? root.startIndex)]) }
    return readText(root + "/" + relativePath)
}

/// The contents of the fenced code blocks of `markdown` tagged `language` ("" for untagged).
package func codeBlocks(in markdown: String, language: String) -> [String] {
    var blocks: [String] = []
    var open: (language: Substring, lines: [Substring])?
    for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
        if let block = open {
            if line == "```" {
                if block.language == language { blocks.append(block.lines.map { $0 + "\n" }.joined()) }
                open = nil
            } else {
                open?.lines.append(line)
            }
        } else if line.hasPrefix("```") {
            open = (line.dropFirst(3), [])
        }
    }
    return blocks
}

/// The path of an executable target built beside the test binary (a dependency of the test
/// target), or a message saying it is missing (which then fails the spawn that uses it).
package func executableBesideTests(_ name: String) -> String {
    var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    var folder = String(decoding: buffer[0..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    while let slash = folder.lastIndex(of: "/"), slash != folder.startIndex {
        folder = String(folder[..<slash])
        if access(folder + "/" + name, X_OK) == 0 { return folder + "/" + name }
    }
    return "\(name) not found above the test executable; build with --build-tests"
}

/// `executableBesideTests(_:)`, throwing when the executable is not there.
package func builtExecutable(_ name: String) throws -> String {
    let path = executableBesideTests(name)
    guard access(path, X_OK) == 0 else { throw TestFailure(path) }
    return path
}

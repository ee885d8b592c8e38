#if canImport(Glibc)
import Glibc
#endif

/// The fuzz targets' main outside fuzzing builds: runs the target once over every input named
/// on the command line (a file, or a directory of them: a corpus or crash files), the way
/// libFuzzer runs a single input, so a crash found by the fuzzer replays in a plain build.
public enum Replay {
    public static func main(_ target: (UnsafeRawBufferPointer) -> Void) -> Never {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            var usage = Array("usage: \(CommandLine.arguments[0]) FILE-OR-DIRECTORY...\n".utf8)
            _ = write(STDERR_FILENO, &usage, usage.count)
            exit(2)
        }
        var count = 0
        for path in paths {
            for file in files(at: path) {
                guard let bytes = contents(of: file) else { fuzzFailure("cannot read \(file)") }
                bytes.withUnsafeBytes(target)
                count += 1
            }
        }
        var line = Array("replayed \(count) inputs\n".utf8)
        _ = write(STDERR_FILENO, &line, line.count)
        exit(0)
    }

    private static func files(at path: String) -> [String] {
        guard let directory = opendir(path) else { return [path] }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if !name.hasPrefix(".") { names.append(path + "/" + name) }
        }
        return names.sorted()
    }

    private static func contents(of path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
        }
    }
}

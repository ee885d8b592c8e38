#if canImport(Glibc)
import Glibc
#endif

/// Ends the process the way libFuzzer notices: a line on stderr saying which property broke,
/// then abort(). libFuzzer saves the input as a crash-* file; the replay build exits non-zero.
public func fuzzFailure(_ message: String) -> Never {
    var line = Array("fuzz property violated: \(message)\n".utf8)
    _ = write(STDERR_FILENO, &line, line.count)
    abort()
}

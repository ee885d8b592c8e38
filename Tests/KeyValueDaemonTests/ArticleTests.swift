import Foundation
import Testing

/// The DocC article on kv-daemon's design quotes the daemon's code: each quotation must still
/// be the code, or the article describes a daemon that no longer exists.
@Suite("The kv-daemon article")
struct ArticleTests {
    @Test("every swift block of KeyValueDaemon.md appears verbatim in Examples/KeyValueDaemon")
    func quotationsAreTheCode() throws {
        var root = #filePath
        for _ in 0..<3 { root = String(root[..<root.lastIndex(of: "/")!]) }
        let article = try String(contentsOfFile: root + "/Sources/RunLoopKit/RunLoopKit.docc/KeyValueDaemon.md", encoding: .utf8)
        let folder = root + "/Examples/KeyValueDaemon"
        let sources = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOfFile: folder + "/" + $0, encoding: .utf8) }
        var blocks: [String] = []
        var current: [Substring]?
        for line in article.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil && line == "```swift" {
                current = []
            } else if current != nil && line == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        #expect(!blocks.isEmpty)
        for block in blocks {
            #expect(sources.contains { $0.contains(block) }, "not in the daemon's sources:\n\(block)")
        }
    }
}

// Every DocC article's example is a complete program under Tests/DocExamples, shown verbatim
// by its article together with what it prints (an article may show several, each followed by
// its output). These tests check that the article still shows the program's exact text, then
// run the program and compare its output with the article's, so an example that no longer
// compiles or no longer does what its article says fails.
// (The systemd article's example needs a notify socket: RunLoopKitSystemdTests runs it.)

import Glibc
import PackageTestSupport
import Testing

struct DocumentedExample: Sendable, CustomTestStringConvertible {
    var article: String      // under Sources/RunLoopKit/RunLoopKit.docc
    var folder: String       // under Tests/DocExamples
    var executable: String
    /// Output lines are compared per process: lines starting with each prefix, in order.
    var processPrefixes: [String] = [""]
    var testDescription: String { "\(article): \(folder)" }
}

private let examples = [
    DocumentedExample(article: "ComingFromCFRunLoop.md", folder: "ComingFromCF", executable: "ComingFromCFExample"),
    DocumentedExample(article: "ComingFromCFRunLoop.md", folder: "ComingFromCFThreads",
                      executable: "ComingFromCFThreadsExample"),
    DocumentedExample(article: "ResidentThreads.md", folder: "ResidentThreads", executable: "ResidentThreadsExample"),
    DocumentedExample(article: "PortsAndMessages.md", folder: "PortsAndMessages", executable: "PortsAndMessagesExample"),
    DocumentedExample(article: "CrossProcessAndNamedPorts.md", folder: "CrossProcess", executable: "CrossProcessExample",
                      processPrefixes: ["child:", "parent:"]),
    DocumentedExample(article: "SwiftConcurrency.md", folder: "Concurrency", executable: "ConcurrencyExample"),
]

@Suite("DocC articles: each example is the compiled program, and prints what its article says")
struct DocumentationExampleTests {

    @Test("the article shows its example program verbatim", arguments: examples)
    func articleShowsTheProgram(_ example: DocumentedExample) throws {
        let article = try #require(readPackageFile("Sources/RunLoopKit/RunLoopKit.docc/" + example.article))
        let program = try #require(readPackageFile("Tests/DocExamples/\(example.folder)/main.swift"))
        let shown = codeBlocks(in: article, language: "swift").contains(program)
        #expect(shown, """
            \(example.article) shows no swift code block identical to Tests/DocExamples/\(example.folder)/main.swift; \
            copy the program into the article (or the article's block into the program)
            """)
    }

    @Test("the example runs, exits 0 and prints the lines its article shows", arguments: examples)
    func programPrintsWhatTheArticleSays(_ example: DocumentedExample) throws {
        let article = try #require(readPackageFile("Sources/RunLoopKit/RunLoopKit.docc/" + example.article))
        let program = try #require(readPackageFile("Tests/DocExamples/\(example.folder)/main.swift"))
        let printed = try #require(printedLines(in: article, after: program),
                                   "\(example.article) shows no output after the example of \(example.folder)")
        let outcome = try #require(runChild(executableBesideTests(example.executable), [], timeout: .seconds(60)),
                                   "could not start \(example.executable)")
        #expect(outcome.exitCode == 0, "\(example.executable): exit \(String(describing: outcome.exitCode)), signal \(String(describing: outcome.signal))")
        let lines = outcome.output.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).dropLast()
        for prefix in example.processPrefixes {
            #expect(lines.filter { $0.hasPrefix(prefix) } == printed.filter { $0.hasPrefix(prefix) },
                    "\(example.executable) printed:\n\(outcome.output)")
        }
        #expect(lines.count == printed.count, "\(example.executable) printed:\n\(outcome.output)")
    }
}

@Test("the README's example is Tests/LoopHost/ReadmeExample.swift, but for the function that wraps it there")
func readmeShowsTheRunExample() throws {
    let readme = try #require(readPackageFile("README.md"))
    let file = try #require(readPackageFile("Tests/LoopHost/ReadmeExample.swift"))
    // The file: a comment, the imports, then `func runReadmeExample() throws {`, the example
    // indented by four spaces, and `}`.
    let lines = file.split(separator: "\n", omittingEmptySubsequences: false).drop { $0.hasPrefix("//") || $0.isEmpty }
    let opening = try #require(lines.firstIndex { $0.hasPrefix("func runReadmeExample()") })
    let closing = try #require(lines.lastIndex(of: "}"))
    let body = lines[(opening + 1)..<closing].map { $0.hasPrefix("    ") ? $0.dropFirst(4) : $0 }
    let example = (lines[..<opening] + body).map { $0 + "\n" }.joined()
    let shown = codeBlocks(in: readme, language: "swift").contains(example)
    #expect(shown, "README.md shows no swift code block identical to ReadmeExample.swift's example:\n\(example)")
}

/// The lines of the untagged block that follows the first "It prints" after `program`'s swift
/// block in the article: that example's output.
func printedLines(in article: String, after program: String) -> [String]? {
    guard let shown = article.range(of: "```swift\n" + program + "```"),
          let intro = article[shown.upperBound...].range(of: "It prints") else { return nil }
    return codeBlocks(in: String(article[intro.upperBound...]), language: "").first?
        .split(separator: "\n").map(String.init)
}


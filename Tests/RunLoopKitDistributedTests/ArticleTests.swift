// The "Distributed actors" DocC article shows Tests/DocExamples/Distributed/main.swift verbatim
// and what it prints: these tests check that the article still shows the program's exact text,
// then run the program (two processes) and compare what each process printed with the article.

import Glibc
import PackageTestSupport
import Testing

@Suite("DocC: the Distributed actors article's example is the compiled program", .timeLimit(.minutes(2)))
struct ArticleTests {
    static let article = "Sources/RunLoopKitDistributed/RunLoopKitDistributed.docc/DistributedActors.md"
    static let program = "Tests/DocExamples/Distributed/main.swift"

    @Test("the article shows its example program verbatim")
    func articleShowsTheProgram() throws {
        let article = try #require(readPackageFile(Self.article))
        let program = try #require(readPackageFile(Self.program))
        #expect(codeBlocks(in: article, language: "swift").contains(program), """
            DistributedActors.md shows no swift code block identical to \(Self.program); copy the program \
            into the article (or the article's block into the program)
            """)
    }

    @Test("the example runs, exits 0, and each process prints the lines the article shows")
    func programPrintsWhatTheArticleSays() async throws {
        let article = try #require(readPackageFile(Self.article))
        let paragraphs = article.split(separator: "\n", omittingEmptySubsequences: false)
        let intro = try #require(paragraphs.firstIndex { $0.hasPrefix("It prints") })
        let rest = paragraphs[(intro + 1)...].joined(separator: "\n")
        let shown = try #require(codeBlocks(in: rest, language: "").first)
            .split(separator: "\n").map(String.init)
        let example = try PeerProcess([], executable: executableBesideTests("DistributedExample"))
        #expect(await example.exitStatus() == 0, "\(example.output)")
        let printed = example.output.split(separator: "\n").map(String.init)
        for role in ["daemon:", "client:"] {
            #expect(printed.filter { $0.hasPrefix(role) } == shown.filter { $0.hasPrefix(role) }, "\(example.output)")
        }
        #expect(printed.count == shown.count, "\(example.output)")
    }
}


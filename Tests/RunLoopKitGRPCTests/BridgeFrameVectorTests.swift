#if GRPC
#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import RunLoopKitGRPC
import Testing

/// Protocols/grpc-bridge-frame.md §6: every vector decodes to its expectation, and the valid
/// ones encode back to their bytes.
@Suite("gRPC bridge frame vectors")
struct BridgeFrameVectorTests {
    static let folder = String(#filePath.split(separator: "/", omittingEmptySubsequences: false).dropLast(3)
        .joined(separator: "/")) + "/Protocols/vectors/grpc"

    struct Vector: CustomStringConvertible {
        let name: String
        let frame: [UInt8]
        let expect: String
        var description: String { name }
    }

    static let vectors: [Vector] = {
        guard let names = try? FileManagerless.list(folder) else { return [] }
        return names.filter { $0.hasSuffix(".vector") }.sorted().compactMap { name in
            guard let text = FileManagerless.read(folder + "/" + name) else { return nil }
            var frame: [UInt8] = []
            var expect = ""
            for line in text.split(separator: "\n") {
                if line.hasPrefix("frame:") {
                    frame = line.dropFirst(6).split(separator: " ").compactMap { UInt8($0, radix: 16) }
                } else if line.hasPrefix("expect: ") {
                    expect = String(line.dropFirst(8))
                }
            }
            return Vector(name: name, frame: frame, expect: expect)
        }
    }()

    @Test("the vectors are there", .timeLimit(.minutes(1)))
    func present() {
        #expect(Self.vectors.count == 24)
    }

    @Test("decode, and encode the valid ones byte for byte", arguments: vectors)
    func vector(_ vector: Vector) throws {
        let result: Result<BridgeFrame, BridgeFrameError>
        do {
            result = .success(try vector.frame.withUnsafeBytes { try BridgeFrame.decode($0) })
        } catch let error as BridgeFrameError {
            result = .failure(error)
        }
        let words = vector.expect.split(separator: " ").map(String.init)
        switch result {
        case .failure(let error):
            #expect(words == ["error", "\(error)"])
        case .success(let frame):
            #expect(Self.describe(frame) == vector.expect)
            #expect(try frame.encoded() == vector.frame)
        }
    }

    static func describe(_ frame: BridgeFrame) -> String {
        func hex(_ data: [Data]) -> String {
            data.map { $0.isEmpty ? " -" : " " + $0.map { byte in
                String(byte, radix: 16, uppercase: true).count == 1 ? "0" + String(byte, radix: 16, uppercase: true)
                    : String(byte, radix: 16, uppercase: true)
            }.joined() }.joined()
        }
        switch frame {
        case .open(let name): return "open \(name)"
        case .accept: return "accept"
        case .message(let msgid, let reply, let timeout, let data):
            let nanoseconds = timeout.map { $0.components.seconds * 1_000_000_000 + $0.components.attoseconds / 1_000_000_000 } ?? 0
            return "message \(msgid) \(reply) \(nanoseconds)" + hex(data)
        case .reply(let msgid, let reply, let data):
            return "reply \(msgid) \(reply)" + hex(data)
        }
    }
}

/// Directory listing and file reading with Glibc (FoundationEssentials has no FileManager).
enum FileManagerless {
    static func list(_ path: String) throws -> [String] {
        guard let directory = opendir(path) else { throw PeerError("opendir \(path)") }
        defer { closedir(directory) }
        var names: [String] = []
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    static func read(_ path: String) -> String? {
        guard let file = fopen(path, "r") else { return nil }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
#endif

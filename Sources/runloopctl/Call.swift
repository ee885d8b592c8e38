import Foundation
import RunLoopKit

/// `call NAME MSGID [--text S | --hex H | --file F] [--timeout D]`: one request to a published
/// name, as `busctl call` / `varlinkctl call`; prints the reply's msgid and components.
enum Call {
    static func run(_ arguments: Arguments) throws {
        let name = try arguments.positional(0, "NAME")
        let msgidText = try arguments.positional(1, "MSGID")
        try arguments.expectAtMost(2)
        guard let msgid = UInt32(msgidText) else { throw Failure("'\(msgidText)' is not a msgid (0–4294967295)") }
        let payloads = ["--text", "--hex", "--file"].filter { arguments.options[$0] != nil }
        guard payloads.count <= 1 else { throw Failure("call: give at most one of --text, --hex, --file") }
        var components: [MessagePort.Message.Component] = []
        if let text = arguments.options["--text"] { components.append(.data(Data(text.utf8))) }
        if let hex = arguments.options["--hex"] { components.append(.data(try parseHex(hex))) }
        if let path = arguments.options["--file"] {
            guard let data = FileManager.default.contents(atPath: path) else { throw Failure("cannot read \(path)") }
            components.append(.data(data))
        }
        let timeout = try arguments.options["--timeout"].map(parseDuration) ?? .seconds(30)

        let port = try MessagePort.connect(to: name)
        defer { port.invalidate() }
        let reply = try port.sendRequest(msgid: msgid, components: components, timeout: timeout,
                                         replyMode: ThreadRunLoop.Mode(rawValue: "runloopctl.reply"))
        let described = reply.components.map(describe)
        if arguments.json {
            printJSON(["msgid": reply.msgid, "components": described])
            return
        }
        say("msgid \(reply.msgid)")
        for (index, component) in described.enumerated() {
            switch component["type"] as? String {
            case "data":
                let body = (component["text"] as? String).map { "\"\($0)\"" } ?? (component["hex"] as? String ?? "")
                say("  [\(index)] data, \(component["size"] ?? 0) bytes: \(body)")
            default:
                say("  [\(index)] port (a send right)")
            }
        }
    }

    /// A component as `call` prints it: UTF-8 text where the bytes are valid UTF-8, hex otherwise.
    static func describe(_ component: MessagePort.Message.Component) -> [String: Any] {
        switch component {
        case .data(let data):
            var value: [String: Any] = ["type": "data", "size": data.count]
            if let text = String(data: data, encoding: .utf8) { value["text"] = text }
            else { value["hex"] = data.map { String(format: "%02x", $0) }.joined() }
            return value
        case .port:
            return ["type": "port"]
        }
    }

    static func parseHex(_ text: String) throws -> Data {
        let digits = Array(text.filter { !$0.isWhitespace })
        guard digits.count % 2 == 0 else { throw Failure("--hex needs an even number of hex digits") }
        var bytes = Data()
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(digits[index...index + 1]), radix: 16) else {
                throw Failure("'\(text)' is not hex")
            }
            bytes.append(byte)
        }
        return bytes
    }
}

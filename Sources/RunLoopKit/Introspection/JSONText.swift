/// A JSON value written by hand, for the introspection endpoint's answers (the core links no
/// JSON encoder). Written only when `runloopctl` asks, never on a loop's path.
enum JSONText {
    case string(String)
    case integer(Int64)
    case unsigned(UInt64)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONText])
    /// Members in the order given, so answers read the same every time.
    case object([(String, JSONText)])

    static func string(_ value: String?) -> JSONText { value.map { .string($0) } ?? .null }
    static func int(_ value: Int) -> JSONText { .integer(Int64(value)) }
    static func seconds(_ duration: Duration) -> JSONText {
        .number(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    /// The compact text, on one line (JSON Lines).
    var text: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .string(let value): Self.quote(value, into: &out)
        case .integer(let value): out += String(value)
        case .unsigned(let value): out += String(value)
        case .number(let value): out += value.isFinite ? "\(value)" : "null"
        case .bool(let value): out += value ? "true" : "false"
        case .null: out += "null"
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                Self.quote(key, into: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func quote(_ value: String, into out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

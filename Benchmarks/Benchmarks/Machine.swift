import Foundation

/// The machine line: what a reader needs to compare a table with another one.
struct Machine: Sendable {
    var cpuModel: String
    var cores: Int
    var kernel: String
    var architecture: String

    static func current() -> Machine {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuinfo.split(separator: "\n")
            .first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        var names = utsname()
        uname(&names)
        func field<T>(_ value: T) -> String {
            withUnsafeBytes(of: value) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return Machine(cpuModel: model, cores: sysconf(Int32(_SC_NPROCESSORS_ONLN)),
                       kernel: "\(field(names.sysname)) \(field(names.release))",
                       architecture: field(names.machine))
    }

    var line: String { "machine: \(cpuModel), \(cores) cores, \(kernel), \(architecture)" }
}

import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// `list [--all-users]`: like `busctl list`, from the kernel's socket table — the publisher
/// need not have introspection on.
enum List {
    static func run(_ arguments: Arguments) throws {
        try arguments.expectAtMost(0)
        let names = try Names.published(scopes: arguments.flags.contains("--all-users") ? nil : Names.callerScopes)
        if arguments.json {
            printJSON(names.map(\.json))
            return
        }
        table(["NAME", "SCOPE", "PID", "UID", "COMMAND", "UNIT", "INTROSPECTION"], names.map { name in
            [name.name, String(name.scope), name.pid.map { String($0) } ?? "-", name.uid.map { String($0) } ?? "-",
             name.command ?? "-", name.unit ?? "-", name.introspection ? "yes" : "-"]
        })
    }
}

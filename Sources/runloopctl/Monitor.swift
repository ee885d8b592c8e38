enum Monitor {
    static func run(_ arguments: Arguments) throws { throw Failure("monitor: not available yet") }
}
enum TraceCommand {
    static func run(_ arguments: Arguments) throws { throw Failure("trace: not available yet") }
}

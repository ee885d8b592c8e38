/// The text of `ThreadRunLoop.debugDescription`, laid out like CFRunLoop's description:
/// the loop, its current and common modes, the common-mode items, then each mode's items.
struct LoopDescription {
    let loop: ThreadRunLoop
    let state: LoopState

    var text: String {
        var lines = ["<ThreadRunLoop \(loop.owner)> {"]
        lines.append("  current mode = \(state.modeStack.last.map(\.rawValue) ?? "(not running)")")
        lines.append("  run stack = [\(state.modeStack.map(\.rawValue).joined(separator: ", "))]")
        lines.append("  common modes = [\(state.commonModes.map(\.rawValue).sorted().joined(separator: ", "))]")
        lines.append("  pending blocks = \(state.blocks.count)")
        lines.append("  common mode items = {")
        lines += describe(state.commonItems.inServiceOrder, indent: "    ")
        lines.append("  }")
        lines.append("  modes = {")
        for (mode, modeState) in state.modes.sorted(by: { $0.key.rawValue < $1.key.rawValue }) {
            lines.append("    \(mode.rawValue)\(state.commonModes.contains(mode) ? " (common)" : "") = {")
            lines += describe(modeState.items.inServiceOrder, indent: "      ")
            lines.append("    }")
        }
        lines.append("  }")
        lines.append("}")
        return lines.joined(separator: "\n")
    }

    private func describe(_ items: ItemSet, indent: String) -> [String] {
        var lines: [String] = []
        func section(_ title: String, _ entries: [String]) {
            lines.append("\(indent)\(title) = \(entries.isEmpty ? "(none)" : "")")
            lines += entries.map { "\(indent)  \($0)" }
        }
        section("sources0", items.sources.map(\.description))
        section("ports", items.ports.map(\.description))
        section("fd sources", items.fileDescriptorSources.map(\.description))
        section("timers", items.timers.map(\.description))
        section("observers", items.observers.map(\.description))
        return lines
    }
}

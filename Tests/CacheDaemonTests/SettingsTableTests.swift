import Foundation
import Testing
@_spi(Harness) @testable import CacheDaemon

/// The settings table is the one source of every setting: docs/operations.md,
/// `--help`, the environment names and the reload rule must agree with it.
@Suite struct SettingsTableTests {
    static let operations: String = {
        let here = URL(fileURLWithPath: #filePath)
        let doc = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/operations.md")
        return (try? String(contentsOf: doc, encoding: .utf8)) ?? ""
    }()

    /// The backticked names in `text`.
    static func names(_ text: Substring) -> Set<String> {
        Set(text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) })
    }

    @Test func operationsListsEverySettingAndNoOther() throws {
        let doc = Self.operations
        try #require(!doc.isEmpty, "docs/operations.md not found")
        let section = doc[doc.range(of: "## Configuration")!.upperBound...].prefix { _ in true }
        let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
        let rows = section[..<end].split(separator: "\n").filter { $0.hasPrefix("| `") }
        let documented = Set(rows.map { row in String(row.split(separator: "`")[1]) })
        #expect(documented == Set(Settings.keys), "in the doc only: \(documented.subtracting(Settings.keys)); in the table only: \(Set(Settings.keys).subtracting(documented))")
    }

    @Test func operationsNamesWhatAReloadChanges() throws {
        let doc = Self.operations
        let start = try #require(doc.range(of: "can change while running is applied:"))
        let stop = try #require(doc.range(of: "the log names every change", range: start.upperBound..<doc.endIndex))
        let live = Self.names(doc[start.upperBound..<stop.lowerBound])
        #expect(live == Set(Settings.table.filter { $0.reload == .live }.map(\.name)))
    }

    @Test func helpShowsEverySettingWithItsDefault() throws {
        let lines = Settings.usage.split(separator: "\n").map(String.init)
        let defaults = Settings()
        for spec in Settings.table {
            let line = try #require(lines.first { $0.hasPrefix("  --\(spec.name) \(spec.value) ") }, "\(spec.name) has no line in --help")
            let shown = spec.show(defaults)
            // No value of its own ("-": a paging parameter's doc names the one
            // its paging kind uses), or one decided at start (store, socket).
            guard shown != "-", spec.name != "store", spec.name != "socket" else { continue }
            // The default as --help spells it, read back through the row's
            // own parser, is the value `Settings()` holds.
            guard let open = line.range(of: "(default ", options: .backwards), line.hasSuffix(")") else {
                Issue.record("\(spec.name): no default at the end of \(line)"); continue
            }
            let printed = String(line[open.upperBound..<line.index(before: line.endIndex)])
            var read = Settings()
            try spec.set(&read, printed)
            #expect(spec.show(read) == shown, "\(spec.name): --help says \(printed), the default is \(shown)")
        }
        #expect(lines.contains { $0.hasPrefix("  --max-object-size SIZE") && $0.hasSuffix("(default 64M)") })
        #expect(lines.contains { $0.hasPrefix("  --concurrency N") && $0.hasSuffix("(default 8)") })
    }

    @Test func everySettingHasItsEnvironmentNameAndParsesItsDefault() throws {
        let defaults = Settings()
        for spec in Settings.table {
            #expect(spec.environment == "CACHED_" + spec.name.uppercased().replacingOccurrences(of: "-", with: "_"))
            let shown = spec.show(defaults)
            guard shown != "-", !["ca-file", "ca-path", "store", "socket"].contains(spec.name) else { continue }
            var s = Settings()
            try spec.set(&s, shown)
            #expect(spec.show(s) == shown, "\(spec.name): its default \(shown) reads back as itself")
        }
    }

    @Test func aReloadAppliesLiveSettingsAndKeepsTheRest() {
        let running = Settings()
        var fresh = running
        fresh.idleTimeout = .seconds(60)
        fresh.maxSize = 1 << 20
        fresh.postsURL = "http://a/p.json"
        let plan = running.reloadPlan(to: fresh)
        #expect(plan.changes == ["posts-url - -> http://a/p.json", "idle-timeout 300.0 -> 60.0"])
        #expect(plan.needRestart == ["max-size"])
        #expect(plan.applied.maxSize == 0 && plan.applied.idleTimeout == .seconds(60) && plan.applied.postsURL == "http://a/p.json")
    }
}

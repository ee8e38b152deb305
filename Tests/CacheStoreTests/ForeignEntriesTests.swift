import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// Files the store did not make, inside a real store: start-up cleanup,
/// reconciliation of post files, gc and compaction leave them as they are
/// and report each once; the store's own leftovers are still removed.
@Suite struct ForeignEntriesTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("a png".utf8)
    static let hex30 = String(repeating: "0123456789abcde", count: 2)

    /// Someone else's entries: none has a name and type of the store's own.
    static func foreign(outside: String) -> [String: String] {
        [
            "tmp/notes.txt": "notes", "tmp/README": "read me", "tmp/1-2-3.tmp.bak": "a backup",
            "tmp/link": "-> " + outside,
            "posts/notes.txt": "notes", "posts/007.json": "not how the store spells 7", "posts/README": "read me",
            "posts/5.json.orig": "an editor's copy", "posts/link.json": "-> " + outside,
            "objects/README": "read me", "objects/zz/" + hex30: "not a fan-out", "objects/ab/notes.txt": "notes",
            "objects/ab/" + hex30.uppercased(): "upper case", "objects/ab/" + hex30 + "0": "31 digits",
            "objects/a/b" + hex30: "a one-digit fan-out", "objects/cd/" + hex30: "-> " + outside,
        ]
    }

    /// The store's own leftovers, which cleanup and gc remove.
    static func own() -> [String: String] {
        ["tmp/100-1-2.tmp": "a post file being written", "tmp/100-2-3.part": "a download",
         "posts/99.json": "{\"id\":99}", "objects/ef/" + hex30: "an unreferenced object"]
    }

    @Test func foreignEntriesSurviveCleanupReconciliationGcAndCompaction() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let outside = TempDir(); defer { outside.cleanup() }
        let precious = outside.path + "/precious.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: precious))
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators())
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let w = try store.newObjectWriter(maxSize: 1 << 20)
        try Self.png.withUnsafeBytes { try w.append($0) }
        let kept = try store.commitObject(w, rows: [(0, "a.png")])
        store.close()

        try StoreIdentityTests.make(dir.path, Self.foreign(outside: precious))
        try StoreIdentityTests.make(dir.path, Self.own())
        let reports = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onIgnoredEntry = { line in reports.withLock { $0.append(line) } }
        store = try Store(configuration)
        defer { store.close() }
        store.reconcilePostFiles()
        for _ in 0..<2 {
            _ = try store.collectGarbage()
            _ = try store.compact()
        }
        let after = StoreIdentityTests.snapshot(dir.path)
        for (rel, text) in Self.foreign(outside: precious) {
            #expect(after[rel] == text, "\(rel) was left as it was")
        }
        for rel in Self.own().keys { #expect(after[rel] == nil, "\(rel), the store's own, was removed") }
        #expect(after["posts/1.json"] == "{\"id\":1}")
        #expect(try FileSystem.read(store.objectPath(kept.hash)) == Self.png)
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me")
        // Each reported once, naming it, though gc met the ones in objects/ twice.
        let lines = reports.withLock { $0 }
        for rel in Self.foreign(outside: precious).keys where !rel.hasPrefix("objects/zz/") && !rel.hasPrefix("objects/a/") {
            #expect(lines.filter { $0.hasPrefix("ignored \(dir.path)/\(rel) (") }.count == 1, "\(rel) reported once: \(lines)")
        }
        for fan in ["zz", "a"] {
            #expect(lines.filter { $0.hasPrefix("ignored \(dir.path)/objects/\(fan) (a directory)") }.count == 1, "\(lines)")
        }
        #expect(lines.count == Self.foreign(outside: precious).count, "\(lines)")
    }

    @Test func theStoresOwnNameFormsAreExact() {
        #expect(StoreNames.isTempName("123-4-567.tmp") && StoreNames.isTempName("1-2-3.part"))
        for name in ["notes.tmp", "1-2.tmp", "1-2-3-4.tmp", "1--3.tmp", "a-2-3.tmp", "1-2-3", "1-2-3.tmp.bak", "-1-2-3.tmp"] {
            #expect(!StoreNames.isTempName(name), "\(name)")
        }
        #expect(StoreNames.postID(fileName: "5.json") == 5 && StoreNames.postID(fileName: "-5.json") == -5)
        for name in ["007.json", "+5.json", "5.JSON", ".json", "5.json.orig", "5 .json"] {
            #expect(StoreNames.postID(fileName: name) == nil, "\(name)")
        }
        #expect(StoreNames.objectHash(fanOut: "ab", name: Self.hex30) != nil)
        #expect(StoreNames.objectHash(fanOut: "a", name: "b" + Self.hex30) == nil)
        #expect(StoreNames.objectHash(fanOut: "AB", name: Self.hex30) == nil)
        #expect(StoreNames.objectHash(fanOut: "ab", name: Self.hex30.uppercased()) == nil)
        #expect(StoreNames.printable("a\nb\u{7f}") == "a\\x0ab\\x7f")
    }

    /// The set of reported paths is bounded: past the limit one line says so.
    @Test func reportsAreBounded() {
        let lines = Locked<[String]>([])
        let ignored = IgnoredEntries { line in lines.withLock { $0.append(line) } }
        for i in 0..<(IgnoredEntries.limit + 50) { ignored.note("/s/tmp/f\(i)", "a file") }
        ignored.note("/s/tmp/f0", "a file")
        let all = lines.withLock { $0 }
        #expect(all.count == IgnoredEntries.limit + 1)
        #expect(all.last?.hasPrefix("more than \(IgnoredEntries.limit) entries") == true)
        #expect(ignored.count == IgnoredEntries.limit + 1)
    }
}

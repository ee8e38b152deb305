import Foundation
import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// Files the store did not make, inside a real store: start-up cleanup,
/// reconciliation of post files, gc and compaction leave them as they are
/// and report each once; the store's own leftovers are still removed.
@Suite struct ForeignEntriesTests {
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("a png".utf8)
    /// The store's own leftovers, which cleanup and gc remove.
    static func own() -> [String: String] {
        ["tmp/100-1-2.tmp": "a post file being written", "tmp/100-2-3.part": "a download",
         "posts/99.json": "{\"id\":99}", "objects/ef/" + FileTree.hex30: "an unreferenced object"]
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

        try FileTree.plant(dir.path, FileTree.foreignInStore(outside: precious))
        try FileTree.plant(dir.path, Self.own())
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
        let after = FileTree.snapshot(dir.path)
        for (rel, text) in FileTree.foreignInStore(outside: precious) {
            #expect(after[rel] == text, "\(rel) was left as it was")
        }
        for rel in Self.own().keys { #expect(after[rel] == nil, "\(rel), the store's own, was removed") }
        #expect(after["posts/1.json"] == "{\"id\":1}")
        #expect(try FileSystem.read(store.objectPath(kept.hash)) == Self.png)
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me")
        // Each reported once, naming it, though gc met the ones in objects/ twice.
        let lines = reports.withLock { $0 }
        for rel in FileTree.foreignInStore(outside: precious).keys where !FileTree.foreignFanOuts.contains(where: { rel.hasPrefix("objects/\($0)/") }) {
            #expect(lines.filter { $0.hasPrefix("ignored \(dir.path)/\(rel) (") }.count == 1, "\(rel) reported once: \(lines)")
        }
        for fan in FileTree.foreignFanOuts {
            #expect(lines.filter { $0.hasPrefix("ignored \(dir.path)/objects/\(fan) (a directory)") }.count == 1, "\(lines)")
        }
        #expect(lines.count == FileTree.foreignInStore(outside: precious).count, "\(lines)")
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
        #expect(StoreNames.objectHash(fanOut: "ab", name: FileTree.hex30) != nil)
        #expect(StoreNames.objectHash(fanOut: "a", name: "b" + FileTree.hex30) == nil)
        #expect(StoreNames.objectHash(fanOut: "AB", name: FileTree.hex30) == nil)
        #expect(StoreNames.objectHash(fanOut: "ab", name: FileTree.hex30.uppercased()) == nil)
    }

    /// One escaper for names in log lines: control bytes, DEL, bytes past
    /// ASCII and the backslash itself, so no name splits a line or passes
    /// for an escape.
    @Test func namesAreEscapedForLogLines() {
        #expect(StoreNames.printable("a\nb\u{7f}") == "a\\x0ab\\x7f")
        #expect(StoreNames.printable("line\nbreak\\x0a") == "line\\x0abreak\\x5cx0a")
        #expect(StoreNames.printable("é") == "\\xc3\\xa9")
    }

    /// The set of reported paths is bounded: past the limit one line says so.
    @Test func reportsAreBounded() {
        let lines = Locked<[String]>([])
        let ignored = IgnoredEntries { line in lines.withLock { $0.append(line) } }
        for i in 0..<(IgnoredEntries.limit + 50) { ignored.note("/s/tmp/f\(i)", .regular) }
        ignored.note("/s/tmp/f0", .regular)
        let all = lines.withLock { $0 }
        #expect(all.count == IgnoredEntries.limit + 1)
        #expect(all.last?.hasPrefix("more than \(IgnoredEntries.limit) entries") == true)
        #expect(ignored.count == IgnoredEntries.limit, "the paths named, no sentinel among them")
    }
}

import Foundation
import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// docs/storage-format.md, "What makes a directory a store" and "The store's
/// own names": a directory that is not a store is refused as it is, and
/// inside a store only files of the store's own forms are ever removed.
@Suite struct StoreIdentityTests {
    /// Opening must throw `notAStore`; returns its description.
    static func refusal(_ dir: String, sourceLocation: SourceLocation = #_sourceLocation) -> String? {
        do {
            let store = try Store(StoreConfiguration(directory: dir))
            store.close()
            Issue.record("a directory that is not a store was opened as one", sourceLocation: sourceLocation)
            return nil
        } catch {
            guard case .notAStore = error else {
                Issue.record("not the notAStore refusal: \(error)", sourceLocation: sourceLocation)
                return nil
            }
            return "\(error)"
        }
    }

    @Test func aDirectoryOfSomeoneElsesFilesIsRefusedAndLeftAsItWas() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try FileTree.plant(dir.path, [".bashrc": "alias ll='ls -l'", "notes.txt": "mine",
                                 "tmp/draft.txt": "unsaved work", "posts/2024.md": "a blog post",
                                 "objects/photo.jpg": "a photo", "index.log": "someone's log"])
        let before = FileTree.snapshot(dir.path)
        let message = Self.refusal(dir.path)
        #expect(FileTree.snapshot(dir.path) == before, "nothing created, emptied or written (no lock, no log, tmp/ kept)")
        #expect(message == "refusing to use \(dir.path) as the store: it is not empty and not a store cached made "
                + "(its index.log does not begin with the store's header); found .bashrc, notes.txt, objects/photo.jpg, "
                + "posts/2024.md, tmp/draft.txt; nothing in it was changed: point --store at a new or empty directory, "
                + "or at an existing store")
    }

    @Test func theRefusalNamesTheFirstFewEntriesAndSaysThereAreMore() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try FileTree.plant(dir.path, Dictionary(uniqueKeysWithValues: (1...9).map { ("file\($0)", "x") }))
        let message = Self.refusal(dir.path) ?? ""
        #expect(message.contains("(it holds no index.log); found file1, file2, file3, file4, file5 and more;"), "\(message)")
    }

    /// What `Store.init` creates, and in which order, leaves these behind when
    /// a crash interrupts the creation of a store: they are the store's own.
    @Test(arguments: [
        [:],
        ["lost+found/": ""],
        ["lock": "123\n"],
        ["lock": "123\n", "index.log": ""],
        ["lock": "123\n", "index.log": "CACHE"],
        ["lock": "123\n", "scrub.state": "cached scrub state 1\n"],
        ["lock": "123\n", "feeds.state": "cached feeds state 1\n", "posts.state": "cached posts state 1\n"],
        ["lock": "", "index.log": "", "posts/": "", "objects/": "", "tmp/1-2-3.tmp": "half", "quarantine/": ""],
        ["index.log": "", "tmp/": "", "100-7-99.tmp": "a cut tail being saved", "index.log.corrupt-1-2": "cut bytes"],
    ] as [[String: String]])
    func anEmptyOrHalfCreatedStoreIsOpened(_ found: [String: String]) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        for (rel, _) in found where rel.hasSuffix("/") {
            try FileManager.default.createDirectory(atPath: dir.path + "/" + rel, withIntermediateDirectories: true)
        }
        try FileTree.plant(dir.path, found.filter { !$0.key.hasSuffix("/") })
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators())
        store.close()
        #expect(try FileSystem.read(dir.path + "/index.log").prefix(8) == ArraySlice(RecordCodec.header(version: 1)))
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty, "its temp files were its own")
    }

    /// The refusal quoted in docs/storage-format.md is the one the store makes.
    @Test func theDocumentedRefusalIsTheStoresOwn() throws {
        var docs = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { docs.deleteLastPathComponent() }
        let text = try String(contentsOf: docs.appendingPathComponent("docs/storage-format.md"), encoding: .utf8)
        let found = ".bashrc, Documents/, notes.txt, objects/photo.jpg, posts/2024-01.md and more"
        let error = StoreError.notAStore(directory: "DIR", found: found, log: .missing)
        #expect(text.contains("`cannot open the store: \(error)`"), "\(error)")
    }

    /// A half-created store holds no data: with post or object files beside
    /// it, a log without the header does not make a directory a store.
    @Test func aLogWithoutItsHeaderBesideFilesIsRefused() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8)), (2, Array("{\"id\":2}".utf8))], validators: Validators())
        store.close()
        var log = try FileSystem.read(dir.path + "/index.log")
        log[0] = UInt8(ascii: "X")
        try Data(log).write(to: URL(fileURLWithPath: dir.path + "/index.log"))
        let before = FileTree.snapshot(dir.path)
        let message = Self.refusal(dir.path) ?? ""
        #expect(message.contains("its index.log does not begin with the store's header); found posts/1.json, posts/2.json;"), "\(message)")
        #expect(FileTree.snapshot(dir.path) == before)
    }

    /// `index.log` that is not a regular file is said to be so, not called
    /// missing, and not named again among the entries.
    @Test(arguments: [("-> /etc/passwd", "a symbolic link"), ("/", "a directory")])
    func aLogThatIsNoFileIsSaidToBeSo(_ planted: String, _ kind: String) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        if planted == "/" {
            try FileManager.default.createDirectory(atPath: dir.path + "/index.log", withIntermediateDirectories: false)
        } else {
            try FileTree.plant(dir.path, ["index.log": planted])
        }
        let before = FileTree.snapshot(dir.path)
        #expect(Self.refusal(dir.path) == "refusing to use \(dir.path) as the store: it is not empty and not a store cached made "
                + "(its index.log is \(kind), not a regular file); nothing in it was changed: point --store at a new or "
                + "empty directory, or at an existing store")
        #expect(FileTree.snapshot(dir.path) == before)
    }

    /// The listing bound: `listingLimit` names of the store's own are judged
    /// (a store being created with that many temp files is opened), one more
    /// is too many, and the refusal then says so though none was unexpected.
    @Test func exactlyTheListingLimitOfOwnNamesIsJudgedAndOneMoreIsTooMany() throws {
        let own = TempDir(); defer { own.cleanup() }
        let names = (0..<StoreIdentity.listingLimit).map { "1-\($0)-2.tmp" }
        try FileTree.plant(own.path, Dictionary(uniqueKeysWithValues: names.map { ($0, "") }))
        let store = try Store(StoreConfiguration(directory: own.path))
        store.close()
        let more = TempDir(); defer { more.cleanup() }
        try FileTree.plant(more.path, Dictionary(uniqueKeysWithValues: (names + ["1-999-2.tmp"]).map { ($0, "") }))
        let message = Self.refusal(more.path) ?? ""
        #expect(message.contains("(it holds no index.log); found more entries than a new store holds; nothing"), "\(message)")
    }

    /// A directory of 10,000 foreign names is refused from the first
    /// `listingLimit + 1` names read, not all of them: the five named are
    /// the first in name order among those read (created in a random order,
    /// they are not the five first of all 10,000), then "and more".
    @Test func aHugeDirectoryIsRefusedFromItsFirstNames() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let names = (0..<10_000).map { String(format: "f%05d", $0) }
        for name in names.shuffled() { #expect(FileManager.default.createFile(atPath: dir.path + "/" + name, contents: nil)) }
        let files = try ConfinedDirectory(opening: dir.path)
        defer { files.close() }
        let finding = try #require(try StoreIdentity.judge(files))
        #expect(finding.more && finding.entries.count == StoreIdentity.shownEntries)
        #expect(finding.entries != Array(names.prefix(StoreIdentity.shownEntries)), "all 10,000 names were read: \(finding.entries)")
        #expect(finding.summary.hasSuffix(" and more"))
    }
}

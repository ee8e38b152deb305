import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// docs/storage-format.md, "What makes a directory a store" and "The store's
/// own names": a directory that is not a store is refused as it is, and
/// inside a store only files of the store's own forms are ever removed.
@Suite struct StoreIdentityTests {
    /// Every entry under `root` (relative paths, directories with a `/`),
    /// with each regular file's bytes and each link's target: what must not change.
    static func snapshot(_ root: String) -> [String: String] {
        var out: [String: String] = [:]
        func walk(_ rel: String) {
            let dir = rel.isEmpty ? root : root + "/" + rel
            for name in (try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? [] {
                let r = rel.isEmpty ? name : rel + "/" + name
                let p = root + "/" + r
                var st = stat()
                guard lstat(p, &st) == 0 else { continue }
                switch st.st_mode & S_IFMT {
                case S_IFDIR: out[r + "/"] = ""; walk(r)
                case S_IFLNK: out[r] = "-> " + ((try? FileManager.default.destinationOfSymbolicLink(atPath: p)) ?? "?")
                default: out[r] = (try? String(contentsOfFile: p, encoding: .utf8)) ?? "?"
                }
            }
        }
        walk("")
        return out
    }

    static func make(_ root: String, _ files: [String: String]) throws {
        for (rel, text) in files {
            let p = root + "/" + rel
            try FileManager.default.createDirectory(atPath: (p as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            if text.hasPrefix("-> ") {
                try FileManager.default.createSymbolicLink(atPath: p, withDestinationPath: String(text.dropFirst(3)))
            } else {
                try Data(text.utf8).write(to: URL(fileURLWithPath: p))
            }
        }
    }

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
        try Self.make(dir.path, [".bashrc": "alias ll='ls -l'", "notes.txt": "mine",
                                 "tmp/draft.txt": "unsaved work", "posts/2024.md": "a blog post",
                                 "objects/photo.jpg": "a photo", "index.log": "someone's log"])
        let before = Self.snapshot(dir.path)
        let message = Self.refusal(dir.path)
        #expect(Self.snapshot(dir.path) == before, "nothing created, emptied or written (no lock, no log, tmp/ kept)")
        #expect(message == "refusing to use \(dir.path) as the store: it is not empty and not a store cached made "
                + "(its index.log does not begin with the store's header); found .bashrc, notes.txt, objects/photo.jpg, "
                + "posts/2024.md, tmp/draft.txt; nothing in it was changed: point --store at a new or empty directory, "
                + "or at an existing store")
    }

    @Test func theRefusalNamesTheFirstFewEntriesAndSaysThereAreMore() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        try Self.make(dir.path, Dictionary(uniqueKeysWithValues: (1...9).map { ("file\($0)", "x") }))
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
        ["lock": "", "index.log": "", "posts/": "", "objects/": "", "tmp/1-2-3.tmp": "half", "quarantine/": ""],
        ["index.log": "", "tmp/": "", "100-7-99.tmp": "a cut tail being saved", "index.log.corrupt-1-2": "cut bytes"],
    ] as [[String: String]])
    func anEmptyOrHalfCreatedStoreIsOpened(_ found: [String: String]) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        for (rel, _) in found where rel.hasSuffix("/") {
            try FileManager.default.createDirectory(atPath: dir.path + "/" + rel, withIntermediateDirectories: true)
        }
        try Self.make(dir.path, found.filter { !$0.key.hasSuffix("/") })
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{\"id\":1}".utf8))], validators: Validators())
        store.close()
        #expect(try FileSystem.read(dir.path + "/index.log").prefix(8) == ArraySlice(RecordCodec.fileHeader))
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty, "its temp files were its own")
    }

    /// The refusal quoted in docs/storage-format.md is the one the store makes.
    @Test func theDocumentedRefusalIsTheStoresOwn() throws {
        var docs = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { docs.deleteLastPathComponent() }
        let text = try String(contentsOf: docs.appendingPathComponent("docs/storage-format.md"), encoding: .utf8)
        let found = ".bashrc, Documents/, notes.txt, objects/photo.jpg, posts/2024-01.md and more"
        let error = StoreError.notAStore(directory: "DIR", found: found, logWithoutHeader: false)
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
        let before = Self.snapshot(dir.path)
        let message = Self.refusal(dir.path) ?? ""
        #expect(message.contains("its index.log does not begin with the store's header); found posts/1.json, posts/2.json;"), "\(message)")
        #expect(Self.snapshot(dir.path) == before)
    }
}

import Foundation
import Testing
import CacheProtocol
import TestSupport

/// The real daemon pointed at a directory that is not a store, and a real
/// store holding files the store did not make (docs/storage-format.md, "What
/// makes a directory a store", "The store's own names").
@Suite struct ForeignFilesTests {
    @Test func aDirectoryThatIsNotAStoreIsRefusedAtStartAndLeftAsItWas() throws {
        let scratch = Scratch()
        let home = scratch.path + "/home"
        try FileTree.plant(home, [".bashrc": "alias ll='ls -l'", "notes.txt": "mine", "tmp/draft.txt": "unsaved work",
                              "posts/2024-01.md": "a blog post", "objects/photo.jpg": "a photo", "Documents/cv.txt": "cv"])
        #expect(chmod(home, 0o700) == 0)
        let before = FileTree.snapshot(home)
        let log = try StoreSecurityTests.refusal(scratch, ["--store", home])
        #expect(log.contains("cannot open the store: refusing to use \(home) as the store: it is not empty and not a store cached made "
                             + "(it holds no index.log); found .bashrc, Documents/, notes.txt, objects/photo.jpg, posts/2024-01.md and more; "
                             + "nothing in it was changed: point --store at a new or empty directory, or at an existing store"), "\(log)")
        #expect(FileTree.snapshot(home) == before, "nothing was created, emptied or written")
        // An empty directory is a new store.
        let empty = scratch.path + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        #expect(chmod(empty, 0o700) == 0)
        let daemon = try Daemon(origin: nil, arguments: ["--store", empty], scratch: scratch)
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        #expect(FileManager.default.fileExists(atPath: empty + "/index.log"))
    }

    @Test func foreignFilesInAStoreSurviveStartGcAndCompactionAndAreLoggedOnce() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let (_, precious) = try StoreSecurityTests.bystander(scratch)
        var daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("prefetch")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        let store = daemon.store
        try FileTree.plant(store, FileTree.foreignInStore(outside: precious))
        // The store's own leftovers beside them: a temp file, a post the log
        // does not hold, an object no row references.
        try FileTree.plant(store, ["tmp/100-1-2.part": "a download", "posts/999999.json": "{}", "objects/ef/" + FileTree.hex30: "garbage"])
        daemon = try Daemon(origin: origin, scratch: scratch)
        for op in ["gc", "compact", "gc"] { #expect(try daemon.call(op)["ok"] == .bool(true), "\(op)") }
        #expect(try daemon.call("verify")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        let after = FileTree.snapshot(store)
        for (rel, text) in FileTree.foreignInStore(outside: precious) { #expect(after[rel] == text, "\(rel) survived as it was") }
        for rel in ["tmp/100-1-2.part", "posts/999999.json", "objects/ef/" + FileTree.hex30] {
            #expect(after[rel] == nil, "\(rel), the store's own, was removed")
        }
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me")
        let log = daemon.log
        for rel in FileTree.foreignInStore(outside: precious).keys
        where !FileTree.foreignFanOuts.contains(where: { rel.hasPrefix("objects/\($0)/") }) {
            #expect(log.components(separatedBy: "warning: ignored \(store)/\(rel) (").count == 2, "\(rel) logged once: \(log)")
        }
        for fan in FileTree.foreignFanOuts {
            #expect(log.components(separatedBy: "warning: ignored \(store)/objects/\(fan) (a directory)").count == 2, "\(log)")
        }
    }
}

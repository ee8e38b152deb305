import Foundation
import Testing
import CacheProtocol

/// The real daemon pointed at a directory that is not a store, and a real
/// store holding files the store did not make (docs/storage-format.md, "What
/// makes a directory a store", "The store's own names").
@Suite struct ForeignFilesTests {
    /// Every entry under `root` with each file's text and each link's target.
    static func snapshot(_ root: String) -> [String: String] {
        var out: [String: String] = [:]
        let fm = FileManager.default
        for rel in (try? fm.subpathsOfDirectory(atPath: root)) ?? [] {
            let p = root + "/" + rel
            if let target = try? fm.destinationOfSymbolicLink(atPath: p) { out[rel] = "-> " + target; continue }
            var isDir: ObjCBool = false
            _ = fm.fileExists(atPath: p, isDirectory: &isDir)
            out[rel] = isDir.boolValue ? "/" : ((try? String(contentsOfFile: p, encoding: .utf8)) ?? "?")
        }
        return out
    }

    static func plant(_ root: String, _ files: [String: String]) throws {
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

    @Test func aDirectoryThatIsNotAStoreIsRefusedAtStartAndLeftAsItWas() throws {
        let scratch = Scratch()
        let home = scratch.path + "/home"
        try Self.plant(home, [".bashrc": "alias ll='ls -l'", "notes.txt": "mine", "tmp/draft.txt": "unsaved work",
                              "posts/2024-01.md": "a blog post", "objects/photo.jpg": "a photo", "Documents/cv.txt": "cv"])
        #expect(chmod(home, 0o700) == 0)
        let before = Self.snapshot(home)
        let log = try StoreSecurityTests.refusal(scratch, ["--store", home])
        #expect(log.contains("cannot open the store: refusing to use \(home) as the store: it is not empty and not a store cached made "
                             + "(it holds no index.log); found .bashrc, Documents/, notes.txt, objects/photo.jpg, posts/2024-01.md and more; "
                             + "nothing in it was changed: point --store at a new or empty directory, or at an existing store"), "\(log)")
        #expect(Self.snapshot(home) == before, "nothing was created, emptied or written")
        // An empty directory is a new store.
        let empty = scratch.path + "/empty"
        try FileManager.default.createDirectory(atPath: empty, withIntermediateDirectories: false)
        #expect(chmod(empty, 0o700) == 0)
        let daemon = try Daemon(origin: nil, arguments: ["--store", empty], scratch: scratch)
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        #expect(FileManager.default.fileExists(atPath: empty + "/index.log"))
    }

    static let hex30 = String(repeating: "0123456789abcde", count: 2)

    /// Someone else's entries in tmp/, posts/ and objects/ of a real store.
    static func foreign(_ precious: String) -> [String: String] {
        ["tmp/notes.txt": "notes", "tmp/README": "read me", "tmp/link": "-> " + precious,
         "posts/notes.txt": "notes", "posts/README": "read me", "posts/007.json": "not the store's spelling of 7",
         "posts/link": "-> " + precious,
         "objects/README": "read me", "objects/ab/notes.txt": "notes in a fan-out", "objects/cd/" + hex30: "-> " + precious,
         "objects/zz/" + hex30: "not a fan-out"]
    }

    @Test func foreignFilesInAStoreSurviveStartGcAndCompactionAndAreLoggedOnce() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let (_, precious) = try StoreSecurityTests.bystander(scratch)
        var daemon = try Daemon(origin: origin, scratch: scratch)
        #expect(try daemon.call("prefetch")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        let store = daemon.store
        try Self.plant(store, Self.foreign(precious))
        // The store's own leftovers beside them: a temp file, a post the log
        // does not hold, an object no row references.
        try Self.plant(store, ["tmp/100-1-2.part": "a download", "posts/999999.json": "{}", "objects/ef/" + Self.hex30: "garbage"])
        daemon = try Daemon(origin: origin, scratch: scratch)
        for op in ["gc", "compact", "gc"] { #expect(try daemon.call(op)["ok"] == .bool(true), "\(op)") }
        #expect(try daemon.call("verify")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        let after = Self.snapshot(store)
        for (rel, text) in Self.foreign(precious) { #expect(after[rel] == text, "\(rel) survived as it was") }
        for rel in ["tmp/100-1-2.part", "posts/999999.json", "objects/ef/" + Self.hex30] {
            #expect(after[rel] == nil, "\(rel), the store's own, was removed")
        }
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me")
        let log = daemon.log
        for rel in Self.foreign(precious).keys where !rel.hasPrefix("objects/zz/") {
            #expect(log.components(separatedBy: "warning: ignored \(store)/\(rel) (").count == 2, "\(rel) logged once: \(log)")
        }
        #expect(log.components(separatedBy: "warning: ignored \(store)/objects/zz (a directory)").count == 2, "\(log)")
    }
}

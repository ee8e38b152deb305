import Foundation
import Testing
import CacheProtocol

/// Stores and socket directories another user owns or can write, and links
/// planted in a store, with real users (`nobody`), real modes and the real daemon.
@Suite struct StoreSecurityTests {
    static let nobody: uid_t = 65534

    /// A daemon that must refuse to start; returns its log.
    static func refusal(_ scratch: Scratch, _ arguments: [String]) throws -> String {
        let daemon = try Daemon(origin: nil, arguments: arguments, scratch: scratch, waitReady: false)
        guard waitUntil(20, { !daemon.isRunning }) else {
            daemon.kill9()
            Issue.record("the daemon started instead of refusing: \(daemon.log)")
            return daemon.log
        }
        #expect(daemon.waitForExit() == 1, "the daemon refused to start: \(daemon.log)")
        return daemon.log
    }

    /// A directory outside the store holding a file that must survive.
    static func bystander(_ scratch: Scratch) throws -> (dir: String, file: String) {
        let dir = scratch.path + "/outside"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let file = dir + "/precious.txt"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: file))
        return (dir, file)
    }

    @Test func aStoreOwnedByAnotherUserIsRefused() throws {
        let scratch = Scratch()
        let store = scratch.path + "/store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        #expect(chown(store, Self.nobody, Self.nobody) == 0 && chmod(store, 0o777) == 0)
        let log = try Self.refusal(scratch, ["--store", store])
        #expect(log.contains("refusing to use the store: \(store) is owned by uid 65534"), "\(log)")
        #expect(log.contains("chmod 0700"), "the message says how to fix it: \(log)")
    }

    @Test func aStoreOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let store = scratch.path + "/store"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        #expect(chmod(store, 0o777) == 0)
        let log = try Self.refusal(scratch, ["--store", store])
        #expect(log.contains("can be written by every user (mode 777)"), "\(log)")
    }

    @Test func aParentOthersCanWriteIsRefusedButStickyTmpIsNot() throws {
        let scratch = Scratch()
        let open = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: open, withIntermediateDirectories: true)
        #expect(chmod(open, 0o777) == 0)
        let log = try Self.refusal(scratch, ["--store", open + "/store"])
        #expect(log.contains("a directory above the store: \(open) can be written by every user"), "\(log)")
        // A root-owned sticky directory, as /tmp is: others cannot replace what
        // we own in it, so a store of ours below it is fine.
        #expect(chmod(open, 0o1777) == 0)
        let daemon = try Daemon(origin: nil, arguments: ["--store", open + "/store2"], scratch: scratch)
        #expect(try daemon.call("ping")["ok"] == .bool(true))
        #expect(daemon.stop() == 0)
        // The same sticky directory owned by another user is refused.
        #expect(chown(open, Self.nobody, Self.nobody) == 0)
        let log2 = try Self.refusal(scratch, ["--store", open + "/store3"])
        #expect(log2.contains("a directory above the store: \(open) is owned by uid 65534"), "\(log2)")
    }

    /// A real store (its log has the header, so it is judged a store and
    /// opened): made by starting the daemon on it once.
    static func realStore(_ scratch: Scratch) throws -> String {
        let store = scratch.path + "/store"
        let daemon = try Daemon(origin: nil, arguments: ["--store", store], scratch: scratch)
        #expect(daemon.stop() == 0)
        return store
    }

    @Test(arguments: ["tmp", "posts", "objects", "quarantine"])
    func aSubdirectoryPlantedAsALinkIsNeverFollowed(_ name: String) throws {
        let scratch = Scratch()
        let (outside, precious) = try Self.bystander(scratch)
        let store = try Self.realStore(scratch)
        try FileManager.default.removeItem(atPath: store + "/" + name)
        try FileManager.default.createSymbolicLink(atPath: store + "/" + name, withDestinationPath: outside)
        let log = try Self.refusal(scratch, ["--store", store])
        #expect(log.contains("cannot open the store: store I/O failed: mkdir(\(name) (not a directory)): Too many levels of symbolic links (errno 40)"), "\(log)")
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me", "nothing outside the store was touched")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["precious.txt"])
    }

    @Test func aLockPlantedAsALinkIsNeverFollowed() throws {
        let scratch = Scratch()
        let (_, precious) = try Self.bystander(scratch)
        let store = try Self.realStore(scratch)
        try FileManager.default.removeItem(atPath: store + "/lock")
        try FileManager.default.createSymbolicLink(atPath: store + "/lock", withDestinationPath: precious)
        let log = try Self.refusal(scratch, ["--store", store])
        #expect(log.contains("cannot open the store: store I/O failed: open(lock): Too many levels of symbolic links (errno 40)"), "\(log)")
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me", "the link's target was not written or cut")
    }

    /// A link at index.log is no log: the directory is judged no store (its
    /// target is never opened), and the refusal says what index.log is.
    @Test func aLogPlantedAsALinkIsNeverFollowed() throws {
        let scratch = Scratch()
        let (_, precious) = try Self.bystander(scratch)
        let store = try Self.realStore(scratch)
        try FileManager.default.removeItem(atPath: store + "/index.log")
        try FileManager.default.createSymbolicLink(atPath: store + "/index.log", withDestinationPath: precious)
        let log = try Self.refusal(scratch, ["--store", store])
        #expect(log.contains("cannot open the store: refusing to use \(store) as the store: it is not empty and not a store cached made "
                             + "(its index.log is a symbolic link, not a regular file); nothing in it was changed: "
                             + "point --store at a new or empty directory, or at an existing store"), "\(log)")
        #expect(try String(contentsOfFile: precious, encoding: .utf8) == "keep me", "the link's target was not written or cut")
    }

    @Test func aFanOutDirectoryPlantedAsALinkIsNeverWrittenThrough() throws {
        let origin = try Origin()
        let scratch = Scratch()
        let (outside, _) = try Self.bystander(scratch)
        var daemon = try Daemon(origin: origin, scratch: scratch)
        let (image, path) = try daemon.prefetchedImage(row: 3)
        #expect(daemon.stop() == 0)
        // Replace the object's fan-out directory with a link to elsewhere, drop the
        // object from the index (a fresh store), and fetch the same image again.
        let fan = FileManager.default.fileExists(atPath: path) ? (path as NSString).deletingLastPathComponent : ""
        try FileManager.default.removeItem(atPath: fan)
        try FileManager.default.createSymbolicLink(atPath: fan, withDestinationPath: outside)
        // A log of the header alone: the store, emptied of records.
        try Data("CACHEDL\u{01}".utf8).write(to: URL(fileURLWithPath: daemon.store + "/index.log"))
        daemon = try Daemon(origin: origin, scratch: scratch)
        let r = try daemon.call("get_image", [("row", num(3))])
        #expect(r["ok"] == .bool(false), "the commit failed rather than follow the link: \(r)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["precious.txt"], "nothing was written outside the store")
        #expect(image["hash"]?.string?.isEmpty == false)
        // gc leaves the planted link (the store did not make it) and what it
        // points to, and says so once.
        _ = try daemon.call("gc")
        _ = try daemon.call("gc")
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: fan)) == outside, "the link is left")
        #expect(FileManager.default.fileExists(atPath: outside + "/precious.txt"))
        #expect(daemon.log.components(separatedBy: "warning: ignored \(fan) (a symbolic link)").count == 2, "\(daemon.log)")
    }

    @Test func aSocketDirectoryAnotherUserOwnsIsRefused() throws {
        let scratch = Scratch()
        let dir = scratch.path + "/run"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(chown(dir, Self.nobody, Self.nobody) == 0 && chmod(dir, 0o777) == 0)
        let log = try Self.refusal(scratch, ["--socket", dir + "/cached.sock"])
        #expect(log.contains("refusing to listen on \(dir)/cached.sock: \(dir) is owned by uid 65534"), "\(log)")
        #expect(!FileManager.default.fileExists(atPath: dir + "/cached.sock"), "no socket was bound there")
    }

    @Test func aSocketDirectoryOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let dir = scratch.path + "/run"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        #expect(chmod(dir, 0o777) == 0)
        let log = try Self.refusal(scratch, ["--socket", dir + "/cached.sock"])
        #expect(log.contains("can be written by every user"), "\(log)")
    }

    @Test func systemdsDynamicUserCacheDirectoryLinkIsResolvedOnce() throws {
        // DynamicUser=yes: /var/cache/cached is a link to private/cached, and
        // $CACHE_DIRECTORY names the link (with or without a trailing slash).
        let scratch = Scratch()
        let cache = scratch.path + "/cache"
        try FileManager.default.createDirectory(atPath: cache + "/private/cached", withIntermediateDirectories: true)
        #expect(chmod(cache + "/private", 0o700) == 0 && chmod(cache + "/private/cached", 0o700) == 0)
        try FileManager.default.createSymbolicLink(atPath: cache + "/cached", withDestinationPath: "private/cached")
        for spelling in [cache + "/cached", cache + "/cached/"] {
            let daemon = try Daemon(origin: nil, arguments: ["--store", spelling], scratch: scratch)
            #expect(try daemon.call("ping")["ok"] == .bool(true), "\(spelling)")
            #expect(daemon.stop() == 0)
        }
        #expect(FileManager.default.fileExists(atPath: cache + "/private/cached/index.log"))
        // A link to a directory another user owns is judged by that directory.
        let theirs = scratch.path + "/theirs"
        try FileManager.default.createDirectory(atPath: theirs, withIntermediateDirectories: true)
        #expect(chown(theirs, Self.nobody, Self.nobody) == 0)
        try FileManager.default.createSymbolicLink(atPath: scratch.path + "/link", withDestinationPath: theirs)
        let log = try Self.refusal(scratch, ["--store", scratch.path + "/link/"])
        #expect(log.contains("\(theirs) is owned by uid 65534"), "\(log)")
    }

    @Test func aSocketBelowADirectoryOthersCanWriteIsRefused() throws {
        let scratch = Scratch()
        let open = scratch.path + "/open"
        try FileManager.default.createDirectory(atPath: open + "/run", withIntermediateDirectories: true)
        #expect(chmod(open, 0o777) == 0 && chmod(open + "/run", 0o755) == 0)
        let log = try Self.refusal(scratch, ["--socket", open + "/run/cached.sock"])
        #expect(log.contains("a directory above the socket: \(open) can be written by every user"), "\(log)")
        // cachectl will not talk through it either (another user could have swapped run/).
        let r = try cachectl(["ping"], socket: open + "/run/cached.sock")
        #expect(r.status == 1 && r.stderr.contains("a directory above the socket"), "\(r.stderr)")
    }
}

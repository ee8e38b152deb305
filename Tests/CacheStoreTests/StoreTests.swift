import Foundation
import Dispatch
import Testing
@testable import CacheStore
import CacheSystem

/// A fresh directory under /tmp (or `base`, when it is a directory), removed by `cleanup()`.
struct TempDir {
    let path: String
    init(base: String = "/tmp") {
        var isDirectory: ObjCBool = false
        let parent = FileManager.default.fileExists(atPath: base, isDirectory: &isDirectory) && isDirectory.boolValue ? base : "/tmp"
        var template = Array("\(parent)/cached-test-XXXXXX".utf8CString)
        path = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }
    func cleanup() { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `bytes` to `relative` (beneath this directory) as the store
    /// writes a file: `ConfinedDirectory.writeDurably`, through `tmp/`.
    func writeDurably(_ bytes: [UInt8], to relative: String) throws {
        let files = try ConfinedDirectory(opening: path)
        defer { files.close() }
        try files.writeDurably(bytes, to: relative, tempDirectory: "tmp")
    }
}

private let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("rest of a png".utf8)
private let gif: [UInt8] = Array("GIF89a and the rest".utf8)

private func write(_ bytes: [UInt8], to store: Store) throws -> ObjectWriter {
    try objectWriter(holding: bytes, in: store)
}

private func posts(_ ids: [Int64], title: String = "t") -> [(id: Int64, json: [UInt8])] {
    ids.map { ($0, Array("{\"id\":\($0),\"title\":\"\(title)\"}".utf8)) }
}

@Suite struct StoreTests {
    @Test func postsSurviveReopenAndMirrorTheFeed() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        var change = try store.replacePosts(posts([3, 1, 2]), validators: Validators(etag: "\"v1\""))
        #expect(change == PostsChange(fetched: 3, unchanged: 0, removed: 0))
        change = try store.replacePosts(posts([1]) + posts([2], title: "new") + posts([4]), validators: Validators())
        #expect(change == PostsChange(fetched: 2, unchanged: 1, removed: 1))
        store.close()

        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.posts(offset: 0, limit: 10).page.map { String(decoding: $0.json, as: UTF8.self) } ==
                [#"{"id":1,"title":"t"}"#, #"{"id":2,"title":"new"}"#, #"{"id":4,"title":"t"}"#])
        #expect(store.post(id: 3) == nil)
        #expect(try FileSystem.read(dir.path + "/posts/2.json") == Array(#"{"id":2,"title":"new"}"#.utf8))
        #expect(try FileSystem.status(dir.path + "/posts/3.json") == nil)
        #expect(store.validators(for: .posts) == Validators())
    }

    /// Post files are written by several threads at once; one that cannot be
    /// written fails the refresh, the others stop, the files already replaced
    /// get their old bytes back and no temp file is left behind.
    @Test func aPostFileThatCannotBeWrittenFailsTheRefreshAndRestoresTheOthers() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let ids = Array(Int64(1)...400)
        _ = try store.replacePosts(posts(ids), validators: Validators(etag: "\"v1\""))
        // A directory where post 300's file goes: renaming over it fails (EISDIR).
        try FileSystem.unlink(dir.path + "/posts/300.json")
        #expect(mkdir(dir.path + "/posts/300.json", 0o700) == 0)
        #expect(throws: StoreError.self) {
            try store.replacePosts(posts(ids, title: "changed"), validators: Validators(etag: "\"v2\""))
        }
        for id in ids where id != 300 {
            #expect(try FileSystem.read(dir.path + "/posts/\(id).json") == store.post(id: .int(id)), "post \(id)")
        }
        #expect(store.post(id: 1) == Array(#"{"id":1,"title":"t"}"#.utf8))
        #expect(store.validators(for: .posts) == Validators(etag: "\"v1\""))
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
    }

    @Test func postFilesAreReconciledWithTheLog() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        _ = try store.replacePosts(posts([1, 2]), validators: Validators())
        // A crash between writing a file and logging it leaves newer bytes on disk.
        try dir.writeDurably(Array("{\"id\":1,\"title\":\"uncommitted\"}".utf8), to: "posts/1.json")
        try dir.writeDurably(Array("{}".utf8), to: "posts/9.json")
        try FileSystem.unlink(dir.path + "/posts/2.json")
        #expect(store.reconcilePostFiles().fixed == 3)
        #expect(try FileSystem.read(dir.path + "/posts/1.json") == store.post(id: 1))
        #expect(try FileSystem.read(dir.path + "/posts/2.json") == store.post(id: 2))
        #expect(try FileSystem.status(dir.path + "/posts/9.json") == nil)
    }

    /// A file the reconciliation cannot write is not counted as fixed: it
    /// is reported, once, and fixed by a later reconciliation that can.
    @Test func postFilesThatCannotBeFixedAreReportedNotCounted() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let warnings = Locked<[String]>([])
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.onWarning = { line in warnings.withLock { $0.append(line) } }
        let store = try Store(configuration)
        defer { store.close() }
        _ = try store.replacePosts(posts([1, 2]), validators: Validators())
        try dir.writeDurably(Array("{}".utf8), to: "posts/1.json")
        try dir.writeDurably(Array("{}".utf8), to: "posts/9.json")
        try FileSystem.unlink(dir.path + "/posts/2.json")
        // No temp directory: every write fails (ENOENT); the unlink of 9.json does not.
        #expect(rmdir(dir.path + "/tmp") == 0)
        #expect(store.reconcilePostFiles().fixed == 1)
        let lines = warnings.withLock { $0 }
        #expect(lines.count == 1, "\(lines)")
        #expect(lines.first?.hasPrefix("could not make every post file match the index in \(dir.path)/posts (2 calls failed, the first shown): open(") == true, "\(lines)")
        #expect(lines.first?.hasSuffix("; what failed is tried again at the next start") == true, "\(lines)")
        #expect(try FileSystem.status(dir.path + "/posts/9.json") == nil)
        #expect(try FileSystem.read(dir.path + "/posts/1.json") == Array("{}".utf8))
        #expect(mkdir(dir.path + "/tmp", 0o700) == 0)
        #expect(store.reconcilePostFiles().fixed == 2)
        #expect(try FileSystem.read(dir.path + "/posts/1.json") == store.post(id: 1))
        #expect(try FileSystem.read(dir.path + "/posts/2.json") == store.post(id: 2))
        #expect(warnings.withLock { $0.count } == 1)
    }

    @Test func identicalBytesShareOneObjectFile() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", "A"), ("b.png", nil), ("c.gif", "C")], validators: Validators())
        let a = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")])
        let b = try store.commitObject(try write(png, to: store), rows: [(1, "b.png")])
        #expect(a == b)
        #expect(a.hash == Hash128(of: png))
        #expect(a.type == .png)
        #expect(try FileSystem.read(store.objectPath(a.hash)) == png)
        let fan = try FileSystem.list(dir.path + "/objects")
        #expect(fan == [String(a.hash.hex.prefix(2))])
        #expect(try FileSystem.list(dir.path + "/objects/" + fan[0]) == [String(a.hash.hex.dropFirst(2))])
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
        #expect(store.stats().objects == 1)
        #expect(store.stats().rowsCached == 2)
    }

    /// A newest-first manifest gains a row at the top: every row shifts by
    /// one, and each keeps, by its URL, the object and freshness it had
    /// (before, every image was downloaded again); after a reopen too.
    @Test func rowsThatMovedKeepTheirObjectsByURL() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("a.png", "A"), ("b.gif", "B"), ("", "no image")], validators: Validators())
        let fresh = ImageFreshness(validators: Validators(etag: "\"a1\""), fetched: 1_700_000_000_000, lifetime: .seconds(3600))
        let a = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")], declaredContentType: nil, freshness: fresh)
        let b = try store.commitObject(try write(gif, to: store), rows: [(1, "b.gif")])

        try store.replaceManifest([("new.png", "N"), ("a.png", "A"), ("b.gif", "B"), ("", "no image"), ("a.png", "again")], validators: Validators())
        for _ in 0..<2 {
            #expect(store.row(0)?.object == nil, "a new URL is not cached")
            #expect(store.row(1)?.object == a && store.row(1)?.freshness == fresh)
            #expect(store.row(2)?.object == b && store.row(2)?.freshness == nil)
            #expect(store.row(3)?.object == nil && store.row(3)?.url == "")
            #expect(store.row(4)?.object == a, "a second row of the URL maps it too")
            store.close()
            store = try Store(StoreConfiguration(directory: dir.path))
        }
        // A URL gone from the manifest leaves nothing mapped to it.
        try store.replaceManifest([("b.gif", "B")], validators: Validators())
        #expect(store.row(0)?.object == b && store.stats().rowsCached == 1)
        store.close()
    }

    @Test func nonImageBytesAreRefusedAndLeaveNoFile() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        #expect(throws: StoreError.self) {
            try store.commitObject(try write(Array("<!doctype html><p>Not found".utf8), to: store), rows: [(0, "a.png")])
        }
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
        #expect(try FileSystem.list(dir.path + "/objects").isEmpty)
        #expect(store.row(0)?.object == nil)
    }

    @Test func writerEnforcesMaxSize() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let w = try store.newObjectWriter(maxSize: 10)
        #expect(throws: StoreError.self) { try png.withUnsafeBytes { try w.append($0) } }
        w.discard()
        #expect(try FileSystem.list(dir.path + "/tmp").isEmpty)
    }

    @Test func manifestChangeUncachesOnlyRowsWhoseURLChanged() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("a.png", "A"), ("b.gif", "B")], validators: Validators())
        _ = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")])
        _ = try store.commitObject(try write(gif, to: store), rows: [(1, "b.gif")])
        try store.replaceManifest([("a.png", "A, renamed"), ("other.gif", "B")], validators: Validators())
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.row(0)?.object?.hash == Hash128(of: png))
        #expect(store.row(0)?.description == "A, renamed")
        #expect(store.row(1)?.object == nil)
        #expect(store.row(1)?.url == "other.gif")
    }

    @Test func gcRemovesUnreferencedFilesAndCompactionKeepsState() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("a.png", nil), ("b.gif", nil)], validators: Validators(etag: "e"))
        _ = try store.replacePosts(posts([1, 2]), validators: Validators())
        let a = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")])
        _ = try store.commitObject(try write(gif, to: store), rows: [(1, "b.gif")])
        try store.replaceManifest([("a.png", nil), ("c.gif", nil)], validators: Validators(etag: "e"))
        // A stray object file that no record names (a file of another name
        // is not the store's, and stays: ForeignEntriesTests).
        try FileSystem.makeDirectory(dir.path + "/objects/00")
        try dir.writeDurably([1, 2, 3], to: "objects/00/" + String(repeating: "7", count: 30))
        let gc = try store.collectGarbage()
        #expect(gc.removed == 2)
        #expect(gc.freedBytes == Int64(gif.count + 3))
        #expect(try FileSystem.read(store.objectPath(a.hash)) == png)

        let before = store.stats().logRecords
        let (b, after) = try store.compact()
        #expect(b == before)
        #expect(after < before)
        let expected = (store.posts(offset: 0, limit: 9).page.map(\.json), store.rows(offset: 0, limit: 9).page)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.posts(offset: 0, limit: 9).page.map(\.json) == expected.0)
        #expect(store.rows(offset: 0, limit: 9).page == expected.1)
        #expect(store.validators(for: .manifest) == Validators(etag: "e"))
        #expect(store.stats().logRecords == after)
    }

    @Test func corruptObjectIsQuarantinedNotServed() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil)], validators: Validators())
        let ref = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")])
        var bytes = png
        bytes[10] ^= 1
        let fd = try FileDescriptor.open(store.objectPath(ref.hash), .writeOnly)
        try fd.writeAll(bytes)
        fd.close()
        #expect(throws: StoreError.self) { _ = try store.openVerified(ref.hash) }
        #expect(try FileSystem.status(store.objectPath(ref.hash)) == nil)
        #expect(try FileSystem.list(dir.path + "/quarantine").count == 1)
        #expect(store.row(0)?.object == nil)
    }

    @Test func tornLogTailIsCutAndSavedAside() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(posts([1, 2, 3]), validators: Validators())
        store.close()
        let log = dir.path + "/index.log"
        let good = try FileSystem.read(log)
        let fd = try FileDescriptor.open(log, [.writeOnly, .append])
        try fd.writeAll(RecordCodec.encode(.postRemoved(id: .int(1))).dropLast(3).map { $0 })
        fd.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.recovery != nil)
        #expect(store.posts(offset: 0, limit: 9).total == 3)
        #expect(try FileSystem.read(log) == good)
        let saved = try FileSystem.list(dir.path).filter { $0.hasPrefix("index.log.corrupt-") }
        #expect(saved.count == 1)
    }

    @Test func secondOpenNamesTheHolder() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        // flock locks belong to open file descriptions, so a second open in the same process conflicts too.
        do {
            _ = try Store(StoreConfiguration(directory: dir.path))
            Issue.record("a second open must fail")
        } catch {
            guard case .locked(_, let pid) = error else { Issue.record("unexpected \(error)"); return }
            #expect(pid == getpid())
            #expect("\(error)".contains("in use by process \(getpid())"))
        }
    }

    @Test func evictionKeepsBytesUnderMaxSize() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path, maxBytes: Int64(png.count + 5)))
        defer { store.close() }
        try store.replaceManifest([("a.png", nil), ("b.gif", nil)], validators: Validators())
        _ = try store.commitObject(try write(png, to: store), rows: [(0, "a.png")])
        _ = try store.commitObject(try write(gif, to: store), rows: [(1, "b.gif")])
        #expect(store.stats().bytes <= Int64(png.count + 5))
        #expect(store.row(0)?.object == nil)
        #expect(store.row(1)?.object != nil)
        #expect(store.stats().evictions == 1)
    }
}

@Suite struct GroupCommitAndRecencyTests {
    private static func image(_ n: Int) -> [UInt8] { png + Array("image number \(n)".utf8) }

    /// As many committers as commit threads there can be, each committing
    /// in turn: a commit is queued without waking anyone (GroupCommit), so
    /// a lost wakeup would leave one waiting for ever. Every commit returns
    /// and every row is in the log after a reopen.
    @Test func sixtyFourThreadsCommittingInTurnAllReturnAndAreDurable() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        let threads = 64, each = 4, n = threads * each
        try store.replaceManifest((0..<n).map { ("\($0).png", nil) }, validators: Validators())
        let failures = Locked<[String]>([])
        let finished = DispatchGroup()
        // The log held until every thread's first commit is queued, so
        // commits queue while a leader writes, from then on as well.
        store.writerForTests.withLock { _ in
            for t in 0..<threads {
                finished.enter()
                Thread {
                    for k in 0..<each {
                        let i = t * each + k
                        do { _ = try store.commitObject(try write(Self.image(i), to: store), rows: [(i, "\(i).png")]) } catch {
                            failures.withLock { $0.append("\(i): \(error)") }
                        }
                    }
                    finished.leave()
                }.start()
            }
            while store.queuedCommitsForTests < threads { usleep(1000) }
        }
        // Not a time limit on the work: a bound on a hang (a lost wakeup waits for ever).
        try #require(finished.wait(timeout: .now() + 120) == .success, "every commit returned")
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        #expect(store.stats().rowsCached == n)
        store.close()
        let reopened = try Store(StoreConfiguration(directory: dir.path))
        defer { reopened.close() }
        #expect((0..<n).allSatisfy { reopened.row($0)?.object?.hash == Hash128(of: Self.image($0)) })
    }

    @Test func overlappingCommitsShareOneLogTransaction() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        let n = 8
        try store.replaceManifest((0..<n).map { ("\($0).png", nil) }, validators: Validators())
        let writers = try (0..<n).map { try write(Self.image($0), to: store) }
        let before = store.objectCommitTransactions
        #expect(try commitQueuedTogether(writers, in: store).isEmpty)
        #expect(store.objectCommitTransactions - before <= 2, "one transaction for the first leader, one for the rest")
        #expect(store.stats().rowsCached == n)
        store.close()
        let reopened = try Store(StoreConfiguration(directory: dir.path))
        defer { reopened.close() }
        for i in 0..<n { #expect(reopened.row(i)?.object?.hash == Hash128(of: Self.image(i))) }
    }

    @Test func useTimesSurviveARestartAndDecideEviction() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        try store.replaceManifest([("a", nil), ("b", nil), ("c", nil)], validators: Validators())
        let a = try store.commitObject(try write(Self.image(1), to: store), rows: [(0, "a")])
        usleep(5000)
        let b = try store.commitObject(try write(Self.image(2), to: store), rows: [(1, "b")])
        usleep(5000)
        store.touch(a.hash)  // a is now more recently used than b
        try store.logAccessTimes()
        store.close()

        let limit = a.size + b.size + 4
        store = try Store(StoreConfiguration(directory: dir.path, maxBytes: limit))
        defer { store.close() }
        let times = store.state.withLock { $0.objects.lastUses }
        #expect((times[a.hash] ?? 0) > (times[b.hash] ?? 0))
        _ = try store.commitObject(try write(Self.image(3), to: store), rows: [(2, "c")])
        #expect(store.row(0)?.object?.hash == a.hash, "the recently used object stays")
        #expect(store.row(1)?.object == nil, "the least recently used object goes")
    }
}

@Suite struct AutomaticCompactionTests {
    @Test func theLogIsCompactedPastItsGarbageThresholdAndKeepsTheState() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var config = StoreConfiguration(directory: dir.path)
        config.compactionSlack = 50
        var store = try Store(config)
        var peak = 0
        for round in 0..<200 {
            try store.replaceManifest([("a.png", "round \(round)"), ("b.png", nil)], validators: Validators())
            peak = max(peak, store.stats().logRecords)
        }
        // live = 0 posts + 2 rows x 2 + 0 objects + 4 = 8; threshold 2 x 8 + 50.
        #expect(peak <= 2 * 8 + 50 + 4, "the log never grows far past the threshold (peak \(peak))")
        #expect(store.stats().logRecords < 200 * 4)
        store.close()
        store = try Store(config)
        defer { store.close() }
        #expect(store.row(0)?.description == "round 199")
        #expect(store.rows(offset: 0, limit: 9).total == 2)
    }
}

@Suite struct BatchedRemovalTests {
    @Test func runsOfRemovalsClearExactlyTheRowsThatPointedThere() {
        var s = StoreState()
        let hashes = (0..<6).map { Hash128(high: 0, low: UInt64($0)) }
        var setup: [LogRecord] = [.manifestSize(count: 6)]
        for i in 0..<6 { setup += [.row(row: i, url: "\(i)", description: nil), .rowObject(row: i, hash: hashes[i % 3], size: 10, type: .png)] }
        s.apply(transaction: setup)
        #expect(s.objects.count == 3)
        // Removals, a re-add in between, then more removals: order is kept.
        s.apply(transaction: [.objectRemoved(hash: hashes[0]), .objectRemoved(hash: hashes[1]),
                              .rowObject(row: 0, hash: hashes[0], size: 10, type: .png),
                              .objectRemoved(hash: hashes[2])])
        #expect(s.rows.map { $0.object?.hash } == [hashes[0], nil, nil, nil, nil, nil])
        #expect(s.objects.keys.sorted() == [hashes[0]])
        #expect(s.bytes == 10)
    }

    @Test func theStartupSweepDropsObjectsWhoseFilesAreGone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        try store.replaceManifest((0..<3).map { ("\($0).png", nil) }, validators: Validators())
        var refs: [ObjectRef] = []
        for i in 0..<3 { refs.append(try store.commitObject(try write(png + [UInt8(i)], to: store), rows: [(i, "\(i).png")])) }
        try FileSystem.unlink(store.objectPath(refs[1].hash))
        #expect(try store.dropMissingObjects().dropped == 1)
        #expect(store.row(1)?.object == nil)
        #expect(store.row(0)?.object == refs[0] && store.row(2)?.object == refs[2])
    }
}

@Suite struct OpeningOrderTests {
    /// The log is read (and a damaged tail cut) before the layout is made;
    /// when the layout then fails the open fails, and as nobody logs that
    /// recovery, the error itself says what was cut and where it went.
    @Test func aLayoutFailureAfterACutNamesTheCut() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts([(1, Array("{}".utf8))], validators: Validators())
        store.close()
        let fd = try FileDescriptor.open(dir.path + "/index.log", [.writeOnly, .append])
        try fd.writeAll([9, 9, 9])  // a torn record header
        fd.close()
        // tmp/ replaced by a file: the layout cannot be made.
        #expect(rmdir(dir.path + "/tmp") == 0)
        _ = FileManager.default.createFile(atPath: dir.path + "/tmp", contents: Data("x".utf8))
        do {
            _ = try Store(StoreConfiguration(directory: dir.path))
            Issue.record("opened with tmp/ a file")
        } catch {
            #expect("\(error)".contains("index.log had been cut first: torn record header"), "\(error)")
            #expect("\(error)".contains("index.log.corrupt-"), "\(error)")
        }
        do { _ = try Store(StoreConfiguration(directory: dir.path)) } catch {
            // The second open finds the log already cut: it says only what failed.
            #expect(!"\(error)".contains("had been cut"), "\(error)")
        }
        // The cut bytes are kept aside.
        #expect(try FileSystem.list(dir.path).contains { $0.hasPrefix("index.log.corrupt-") })
    }
}

import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// docs/storage-format.md, "Format evolution": a version-1 store opens and
/// serves as before and stays version 1 (an older cached can still open
/// it) until the store first writes what version 1 cannot hold; then the
/// log is rewritten whole under version 2 and every earlier post and row is
/// still there.
@Suite struct VersionOneStoreTests {
    static let v1Posts = Validators(etag: VersionOneLog.postsETag, lastModified: VersionOneLog.postsLastModified)
    static let v1Manifest = Validators(lastModified: VersionOneLog.manifestLastModified)

    static func log(_ dir: TempDir) throws -> [UInt8] { try FileSystem.read(dir.path + "/index.log") }

    /// Every record in the log file is of format version 1.
    static func onlyVersionOneRecords(_ bytes: [UInt8]) -> Bool {
        var all = true
        _ = LogScanner.scan(bytes) { t in all = all && t.allSatisfy { $0.formatVersion == 1 } }
        return all
    }

    /// What the sample log holds, as the store serves it.
    static func expectSample(_ store: Store, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(store.posts(offset: 0, limit: 10).page.map(\.json) == [1, 2, 3].map(VersionOneLog.json), sourceLocation: sourceLocation)
        #expect(store.postsInFeedOrder().map(\.id) == [.int(1), .int(2), .int(3)], "no order recorded: ascending",
                sourceLocation: sourceLocation)
        #expect(store.post(id: .int(3)) == VersionOneLog.json(3) && store.post(id: .int(9)) == nil, sourceLocation: sourceLocation)
        #expect(store.rows(offset: 0, limit: 9).page.map(\.url) == ["a.png", "b.png"], sourceLocation: sourceLocation)
        #expect(store.row(0)?.description == "A", sourceLocation: sourceLocation)
    }

    @Test func aVersionOneStoreOpensServesItsPostsAndValidatorsAndIsLeftAsItWas() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let bytes = try VersionOneLog.makeStore(dir)
        let store = try Store(StoreConfiguration(directory: dir.path))
        Self.expectSample(store)
        #expect(store.postsKnown && store.manifestKnown)
        #expect(store.postPages == [FeedPage(url: "", validators: Self.v1Posts, next: nil, count: 3)])
        #expect(store.manifestPages == [FeedPage(url: "", validators: Self.v1Manifest, next: nil, count: 2)])
        #expect(store.logFormatVersion == 1)
        #expect(store.reconcilePostFiles().fixed == 3)
        #expect(try FileSystem.list(dir.path + "/posts").sorted() == ["1.json", "2.json", "3.json"])
        store.close()
        #expect(try Self.log(dir) == bytes, "a read-only session writes nothing to the log")
    }

    @Test func aRefreshThatNeedsNothingNewKeepsVersionOneAndSoDoesCompaction() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let bytes = try VersionOneLog.makeStore(dir)
        var store = try Store(StoreConfiguration(directory: dir.path))
        // Integer ids in ascending order, one page of unknown URL: version 1 holds it.
        let posts = [1, 2, 3, 4].map { (id: PostID.int(Int64($0)), json: VersionOneLog.json(Int64($0))) }
        let change = try store.replacePosts(posts, pages: onePage(Validators(etag: "\"v2\""), count: 4))
        #expect(change == PostsChange(fetched: 1, unchanged: 3, removed: 0))
        try store.replaceManifest([("a.png", "A"), ("b.png", nil), ("c.png", nil)], pages: onePage(Self.v1Manifest, count: 3))
        #expect(store.logFormatVersion == 1)
        var now = try Self.log(dir)
        #expect(now[7] == 1 && Array(now.prefix(bytes.count)) == bytes, "appended to, under the same header")
        _ = try store.compact()
        now = try Self.log(dir)
        #expect(now[7] == 1 && Self.onlyVersionOneRecords(now), "compaction keeps version 1 while nothing needs 2")
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postPages == [FeedPage(url: "", validators: Validators(etag: "\"v2\""), count: 4)])
        #expect(store.rows(offset: 0, limit: 9).total == 3 && store.posts(offset: 0, limit: 9).total == 4)
    }

    /// What moves a version-1 store to version 2, each on its own: a string
    /// id, a page with a URL, a second page, an order that is not ascending.
    enum FirstNewThing: CaseIterable, Sendable {
        case stringID, pageURL, twoPages, descendingOrder

        func refresh(_ store: Store) throws {
            let ints = [1, 2, 3].map { (id: PostID.int(Int64($0)), json: VersionOneLog.json(Int64($0))) }
            switch self {
            case .stringID:
                _ = try store.replacePosts(ints + [(.string("a/b"), Array(#"{"id":"a/b"}"#.utf8))], pages: onePage(count: 4))
            case .pageURL:
                _ = try store.replacePosts(ints, pages: [FeedPage(url: "https://o.test/posts", count: 3)])
            case .twoPages:
                _ = try store.replacePosts(ints, pages: [FeedPage(url: "", next: "https://o.test/2", count: 2), FeedPage(url: "", count: 1)])
            case .descendingOrder:
                _ = try store.replacePosts(ints.reversed(), pages: onePage(count: 3))
            }
        }
    }

    @Test(arguments: FirstNewThing.allCases)
    func theFirstRecordVersionOneCannotHoldMovesTheLogToVersionTwoKeepingEverything(_ what: FirstNewThing) throws {
        let dir = TempDir(); defer { dir.cleanup() }
        _ = try VersionOneLog.makeStore(dir)
        var store = try Store(StoreConfiguration(directory: dir.path))
        try what.refresh(store)
        #expect(store.logFormatVersion == 2)
        let written = try Self.log(dir)
        #expect(Array(written.prefix(8)) == Array("CACHEDL".utf8) + [2])
        #expect(!Self.onlyVersionOneRecords(written))
        let feed = store.postsInFeedOrder().map(\.id)
        let pages = store.postPages
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.recovery == nil)
        #expect(store.logFormatVersion == 2)
        #expect(store.postsInFeedOrder().map(\.id) == feed && store.postPages == pages)
        for id in Int64(1)...3 { #expect(store.post(id: .int(id)) == VersionOneLog.json(id)) }
        #expect(store.rows(offset: 0, limit: 9).page.map(\.url) == ["a.png", "b.png"])
        #expect(store.manifestPages == [FeedPage(url: "", validators: Self.v1Manifest, count: 2)], "the manifest's validators too")
    }

    /// The move happens before the write: when the log cannot be rewritten,
    /// the refresh fails and the version-1 log keeps every byte.
    @Test func aMoveThatFailsLeavesTheVersionOneLogAsItWas() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let bytes = try VersionOneLog.makeStore(dir)
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        let same = store.postsInFeedOrder()
        // The rewrite's temp file goes to tmp/: make it a file.
        #expect(rmdir(dir.path + "/tmp") == 0)
        #expect(FileManager.default.createFile(atPath: dir.path + "/tmp", contents: Data()))
        #expect(throws: StoreError.self) {
            try store.replacePosts(same, pages: [FeedPage(url: "https://o.test/posts", count: 3)])
        }
        #expect(try Self.log(dir) == bytes)
        #expect(store.logFormatVersion == 1 && store.postPages == [FeedPage(url: "", validators: Self.v1Posts, count: 3)])
        try FileSystem.unlink(dir.path + "/tmp")
        try FileSystem.makeDirectory(dir.path + "/tmp")
        _ = try store.replacePosts(same, pages: [FeedPage(url: "https://o.test/posts", count: 3)])
        #expect(store.logFormatVersion == 2 && store.postPages[0].url == "https://o.test/posts")
    }

    /// Compaction writes the oldest version that holds its records: once
    /// nothing needs version 2 any more, the store is version 1 again.
    @Test func compactionOfAStoreThatNoLongerNeedsVersionTwoWritesVersionOne() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        _ = try VersionOneLog.makeStore(dir)
        var store = try Store(StoreConfiguration(directory: dir.path))
        try FirstNewThing.stringID.refresh(store)
        _ = try store.compact()
        #expect(store.logFormatVersion == 2, "a string id is still there")
        _ = try store.replacePosts([(.int(1), VersionOneLog.json(1))], pages: onePage(count: 1))
        _ = try store.compact()
        #expect(store.logFormatVersion == 1)
        #expect(try Self.log(dir)[7] == 1 && Self.onlyVersionOneRecords(try Self.log(dir)))
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.posts(offset: 0, limit: 9).page.map(\.json) == [VersionOneLog.json(1)])
        #expect(store.rows(offset: 0, limit: 9).total == 2)
    }

    /// A version-2 record under a version-1 header broke the header's
    /// promise (or a newer cached wrote it): refused as a newer record, the
    /// log left byte for byte.
    @Test func aVersionTwoRecordInAVersionOneLogIsRefusedAndLeftAlone() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let bytes = try VersionOneLog.makeStore(dir)
        try FormatEvolutionTests.append(RecordCodec.encode(.post(id: .string("s"), json: [])) + VersionOneLog.commit,
                                        to: dir.path + "/index.log")
        #expect(try FormatEvolutionTests.expectRefusedUntouched(dir, dir.path + "/index.log")
                == "unknown record type 0x09 at offset \(bytes.count) of index.log")
    }

    /// A new store's log is version 1 until it needs more.
    @Test func aNewStoreStartsAtVersionOne() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        let store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(try Self.log(dir) == RecordCodec.header(version: 1) && store.logFormatVersion == 1)
        #expect(store.postPages.isEmpty && store.manifestPages.isEmpty && !store.postsKnown)
    }
}

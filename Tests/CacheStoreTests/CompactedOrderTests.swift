import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The feed order across compaction: memory must describe the log it
/// rewrote, and a log of large order records is compacted by its size.
@Suite struct CompactedOrderTests {
    static func posts(_ ids: [PostID]) -> [(id: PostID, json: [UInt8])] { ids.map { ($0, Array("{\"id\":\"\($0)\"}".utf8)) } }

    /// After compaction, a refresh back to an order the log no longer
    /// records must log that order: a reopen gives the same order.
    @Test func anOrderRestoredAfterACompactionSurvivesAReopen() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        let c: PostID = .string("c"), a: PostID = .string("a"), b: PostID = .string("b")
        _ = try store.replacePosts(Self.posts([c, a, b]), pages: onePage(count: 3))
        _ = try store.replacePosts(Self.posts([a, b]), pages: onePage(count: 2))
        _ = try store.compact()
        _ = try store.replacePosts(Self.posts([c, a, b]), pages: onePage(count: 3))
        #expect(store.postsInFeedOrder().map(\.id) == [c, a, b])
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postsInFeedOrder().map(\.id) == [c, a, b])
        #expect(store.posts(offset: 0, limit: 9).page.map(\.id) == [c, a, b])
    }

    /// The same through the move to version 2, which rewrites the log too.
    @Test func theMoveToVersionTwoLeavesMemoryAsTheLogReplays() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var store = try Store(StoreConfiguration(directory: dir.path))
        _ = try store.replacePosts(Self.posts([.int(2), .int(1)]), pages: onePage(count: 2))
        _ = try store.replacePosts(Self.posts([.string("x"), .int(2), .int(1)]), pages: onePage(count: 3))
        _ = try store.replacePosts(Self.posts([.int(2), .int(1), .string("x")]), pages: onePage(count: 3))
        let order = store.postsInFeedOrder().map(\.id)
        store.close()
        store = try Store(StoreConfiguration(directory: dir.path))
        defer { store.close() }
        #expect(store.postsInFeedOrder().map(\.id) == order)
    }

    /// A string-id feed gaining a post at the top each refresh logs its
    /// whole order each time: the log is compacted by size, so it stays
    /// within about twice its compacted length plus the slack.
    @Test func aLogOfLargeOrderRecordsIsCompactedBySize() throws {
        let dir = TempDir(); defer { dir.cleanup() }
        var configuration = StoreConfiguration(directory: dir.path)
        configuration.compactionSlackBytes = 256 << 10
        let store = try Store(configuration)
        defer { store.close() }
        var ids: [PostID] = (0..<3_000).map { .string("post-\($0)-" + String(repeating: "x", count: 20)) }
        _ = try store.replacePosts(Self.posts(ids), pages: onePage(count: ids.count))
        let first = try FileSystem.read(dir.path + "/index.log").count
        var largest = first
        for n in 0..<40 {
            ids.insert(.string("new-\(n)"), at: 0)
            ids.removeLast()
            _ = try store.replacePosts(Self.posts(ids), pages: onePage(count: ids.count))
            largest = max(largest, try FileSystem.read(dir.path + "/index.log").count)
        }
        // 40 refreshes of about 100 KB of order each would be 4 MB unbounded.
        #expect(largest < 2 * first + (256 << 10) + 200_000, "largest log \(largest) bytes, first \(first)")
        #expect(store.postsInFeedOrder().map(\.id) == ids)
    }
}

import Foundation
import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// A replay given a `Prefaulter` (a store's open of a log of 8 MiB or more
/// on a machine of two cores or more) grows its tables into the arrays made
/// ahead and ends with the state a replay without one reaches.
@Suite struct PrefaultedReplayTests {
    /// Transactions that grow every table past where it asks for arrays
    /// ahead: posts over two arena chunks, 40,000 rows and objects (the
    /// object table's arrays and its index), uses, removals and a refresh.
    static func transactions() -> [[LogRecord]] {
        let body = String(repeating: "x", count: 900)
        func post(_ i: Int, _ v: Int) -> LogRecord {
            .post(id: .int(Int64(i)), json: Array("{\"id\":\(i),\"title\":\"post \(i) v\(v)\",\"body\":\"\(body)\"}".utf8))
        }
        func hash(_ n: Int) -> Hash128 { LargeTransactionReplayTests.hash(n) }
        var out: [[LogRecord]] = []
        for start in stride(from: 0, to: 40_000, by: 64) {
            out.append((start..<start + 64).flatMap { r -> [LogRecord] in
                [.row(row: r, url: "https://example.com/\(r).png", description: nil),
                 .rowObject(row: r, hash: hash(r), size: Int64(100 + r), type: .png),
                 .access(hash: hash(r), time: Int64(r))]
            })
        }
        out.append((0..<40_000).map { post($0, 1) })  // about 37 MB: three arena chunks
        out.append((0..<5_000).map { .objectRemoved(hash: hash($0 * 3)) } + (0..<2_000).map { .postRemoved(id: .int(Int64($0 * 7))) })
        out.append((0..<10_000).map { post($0, 2) })
        return out
    }

    @Test func aPrefaultedReplayEndsWhereOneWithoutDoes() throws {
        let p = try #require(Prefaulter())
        defer { p.stop() }
        var plain = StoreState(), prefaulted = StoreState()
        for t in Self.transactions() {
            plain.apply(transaction: t)
            Prefaulter.$current.withValue(p) { prefaulted.apply(transaction: t) }
            // Each array asked for is ready when the table grows into it.
            p.waitUntilMade()
        }
        #expect(LargeTransactionReplayTests.same(plain, prefaulted))
        #expect(p.taken >= 10, "only \(p.taken) arrays made ahead were taken: the tables did not use them")
        prefaulted.discardUnusedPages()
        #expect(LargeTransactionReplayTests.same(plain, prefaulted), "the unused pages given back, the state unchanged")
    }

    /// The store's own open of a log over the threshold: every record there.
    @Test func aStoreOpensALargeLogWithThePrefaulter() throws {
        let dir = try makeTempDirectory("prefaulted-replay")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var bytes = RecordCodec.fileHeader
        for t in Self.transactions() {
            for r in t { RecordCodec.encode(r, into: &bytes) }
            RecordCodec.encode(.commit, into: &bytes)
        }
        #expect(Int64(bytes.count) >= Store.prefaultedLog, "the log (\(bytes.count) bytes) is under the prefaulter's threshold")
        try Data(bytes).write(to: URL(fileURLWithPath: dir + "/index.log"))
        var expected = StoreState()
        for t in Self.transactions() { expected.apply(transaction: t) }
        let store = try Store(StoreConfiguration(directory: dir))
        defer { store.close() }
        let stats = store.stats()
        // Removed: every seventh of the first 14,000; set again: the first 10,000.
        #expect(stats.posts == expected.posts.count && stats.posts == 40_000 - (2_000 - 10_000 / 7 - 1))
        #expect(store.post(id: .int(1)) == expected.posts[.int(1)])
        #expect(store.post(id: .int(39_999)) == expected.posts[.int(39_999)])
        #expect(store.post(id: .int(10_003)) == nil)
        #expect(store.post(id: .int(7)).map { String(decoding: $0, as: UTF8.self).contains("post 7 v2") } == true)
    }
}

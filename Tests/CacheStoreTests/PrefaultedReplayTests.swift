import Foundation
import Testing
@testable import CacheStore
import CacheSystem
import TestSupport

/// A replay given a `Prefaulter` (a store's open of a log of 8 MiB or more
/// on a machine of two cores or more) grows every table into the arrays
/// made ahead and ends with the state a replay without one reaches.
@Suite struct PrefaultedReplayTests {
    /// The purposes of `Prefaulter.Key` each table asks with.
    static let purposes = [1: "the post arena's chunks", 2: "the rows' chunks", 3: "a slot index's buckets",
                           4: "the object table's refs", 5: "the object table's uses"]

    /// Transactions that grow every table past where it asks for arrays
    /// ahead: 60,000 rows and objects with their uses (the object table's
    /// arrays and its index grow past 65,536), 40,000 posts of 900 bytes
    /// (over two arena chunks), refreshed, partly removed and set again.
    static func transactions() -> [[LogRecord]] {
        let body = String(repeating: "x", count: 900)
        func post(_ i: Int, _ v: Int) -> LogRecord {
            .post(id: .int(Int64(i)), json: Array("{\"id\":\(i),\"title\":\"post \(i) v\(v)\",\"body\":\"\(body)\"}".utf8))
        }
        func hash(_ n: Int) -> Hash128 { LargeTransactionReplayTests.hash(n) }
        var out: [[LogRecord]] = []
        for start in stride(from: 0, to: 60_000, by: 64) {
            out.append((start..<start + 64).flatMap { r -> [LogRecord] in
                [.row(row: r, url: "https://example.com/\(r).png", description: nil),
                 .rowObject(row: r, hash: hash(r), size: Int64(100 + r), type: .png),
                 .access(hash: hash(r), time: Int64(r))]
            })
        }
        for v in 0..<2 {
            for start in stride(from: 0, to: 40_000, by: 5_000) { out.append((start..<start + 5_000).map { post($0, v) }) }
        }
        out.append((0..<5_000).map { .objectRemoved(hash: hash($0 * 3)) } + (0..<2_000).map { .postRemoved(id: .int(Int64($0 * 7))) })
        out.append((0..<10_000).map { post($0, 2) })
        return out
    }

    @Test func aPrefaultedReplayEndsWhereOneWithoutDoesEveryTableTakingItsArrays() throws {
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
        for (purpose, table) in Self.purposes.sorted(by: { $0.key < $1.key }) {
            #expect(p.taken(purpose: purpose) > 0, "\(table) took no array made ahead")
        }
        prefaulted.discardUnusedPages()
        #expect(LargeTransactionReplayTests.same(plain, prefaulted), "the unused pages given back, the state unchanged")
        prefaulted.apply(transaction: Self.transactions()[0])
        plain.apply(transaction: Self.transactions()[0])
        #expect(LargeTransactionReplayTests.same(plain, prefaulted), "grown again over the pages given back")
    }

    /// The review's differential test, smaller: random transactions that
    /// grow, remove, refresh (some posts of megabytes), compact the arena,
    /// shrink and regrow the rows, the prefaulter's thread waited for or
    /// not (so takes hit and miss): the same state as without, throughout,
    /// after the unused pages are given back, and after more on top.
    @Test func aPrefaultedReplayOfRandomTransactionsMatchesAPlainOne() throws {
        var g = SplitMix(state: 0x5EED)
        let p = try #require(Prefaulter())
        var plain = StoreState(), prefaulted = StoreState()
        plain.posts.deferTitles()
        prefaulted.posts.deferTitles()
        var base = 0
        for round in 0..<14 {
            let t = Self.randomTransaction(&g, base: &base)
            plain.apply(transaction: t)
            Prefaulter.$current.withValue(p) { prefaulted.apply(transaction: t) }
            if g.next() % 2 == 0 { p.waitUntilMade() }
            if round % 4 == 3 { #expect(LargeTransactionReplayTests.same(plain, prefaulted), "round \(round)") }
        }
        p.stop()
        #expect(LargeTransactionReplayTests.same(plain, prefaulted))
        prefaulted.discardUnusedPages()
        #expect(LargeTransactionReplayTests.same(plain, prefaulted), "after the unused pages are given back")
        for _ in 0..<3 {
            let t = Self.randomTransaction(&g, base: &base)
            plain.apply(transaction: t)
            prefaulted.apply(transaction: t)
        }
        plain.posts.locateTitles(threads: 1)
        prefaulted.posts.locateTitles(threads: 1)
        #expect(LargeTransactionReplayTests.same(plain, prefaulted), "after more transactions")
    }

    static func randomTransaction(_ g: inout SplitMix, base: inout Int) -> [LogRecord] {
        func hash(_ n: Int) -> Hash128 { LargeTransactionReplayTests.hash(n) }
        var t: [LogRecord] = []
        switch g.next() % 6 {
        case 0:  // new objects through rows, some used
            let n = 5_000 + Int(g.next() % 15_000)
            t.append(.manifestSize(count: 8_000 + Int(g.next() % 6_000)))
            for i in 0..<n {
                t.append(.rowObject(row: Int(g.next() % 8_000), hash: hash(base + i), size: 10, type: .png))
                if i % 3 == 0 { t.append(.access(hash: hash(base + i), time: Int64(g.next() % 100_000))) }
            }
            base += n
        case 1:  // removals of earlier objects
            for _ in 0..<Int(g.next() % 6_000) { t.append(.objectRemoved(hash: hash(Int(g.next() % UInt64(max(base, 1)))))) }
        case 2, 3:  // posts new and refreshed, a few of megabytes, some removed
            for _ in 0..<(1_000 + Int(g.next() % 8_000)) {
                let id = Int(g.next() % 15_000)
                let size = g.next() % 400 == 0 ? Int(g.next() % (3 << 20)) : 200 + Int(g.next() % 3_000)
                var json = Array("{\"id\":\(id),\"title\":\"t\(g.next() % 100)\",\"b\":\"".utf8)
                json += repeatElement(UInt8(ascii: "a") + UInt8(g.next() % 26), count: size)
                json += Array("\"}".utf8)
                t.append(.post(id: .int(Int64(id)), json: json))
                if g.next() % 10 == 0 { t.append(.postRemoved(id: .int(Int64(g.next() % 15_000)))) }
            }
        case 4:  // the manifest shrinks and grows again
            t.append(.manifestSize(count: Int(g.next() % 2_000)))
            t.append(.manifestSize(count: 5_000 + Int(g.next() % 15_000)))
        default:  // every other kind of record
            for _ in 0..<Int(g.next() % 3_000) { t.append(LargeTransactionReplayTests.randomRecord(&g)) }
        }
        return t
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

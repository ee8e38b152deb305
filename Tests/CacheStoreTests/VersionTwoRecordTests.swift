import Foundation
import Testing
@testable import CacheStore
import CacheSystem

/// The records of format version 2 (docs/storage-format.md, "index.log"):
/// their bytes, where they may appear, and what replaying them does.
@Suite struct VersionTwoRecordTests {
    static let kib = String(repeating: "é", count: 512)  // 1,024 bytes of UTF-8

    static let samples: [LogRecord] = [
        .post(id: .string("a/b"), json: Array(#"{"id":"a/b"}"#.utf8)),
        .post(id: .string("\u{0}..\u{1F600}"), json: []),
        .post(id: .string(kib), json: Array("{}".utf8)),
        .postRemoved(id: .string("-x")),
        .postOrder(start: 0, ids: []),
        .postOrder(start: 4096, ids: [.int(-1), .string("5"), .int(5), .string(kib)]),
        .page(feed: .posts, index: 0, page: FeedPage(url: "https://o.test/p?page=1", validators: Validators(etag: "\"e\"", lastModified: nil),
                                                     next: "https://o.test/p?page=2", count: 20)),
        .page(feed: .manifest, index: 3, page: FeedPage(url: "", validators: Validators(etag: Validators.ignoredETag,
                                                                                         lastModified: "Tue, 01 Dec 2026 06:00:00 GMT"),
                                                        next: nil, count: 0)),
    ]

    @Test(arguments: samples)
    func roundTrips(_ record: LogRecord) throws {
        let framed = RecordCodec.encode(record)
        #expect(Int(framed[0..<8].uint32LE(at: 0)) == framed.count - 8)
        #expect(try RecordCodec.decodePayload(framed[8...], version: 2) == record)
        #expect(record.formatVersion == 2)
    }

    /// Integer ids keep types 1 and 2 (version 1); string ids are 9 and 10.
    @Test func theIdsKindChoosesTheRecordType() {
        #expect(RecordCodec.encode(.post(id: .int(5), json: []))[8] == 1)
        #expect(RecordCodec.encode(.postRemoved(id: .int(5)))[8] == 2)
        #expect(RecordCodec.encode(.post(id: .string("5"), json: []))[8] == 9)
        #expect(RecordCodec.encode(.postRemoved(id: .string("5")))[8] == 10)
        #expect(LogRecord.post(id: .int(5), json: []).formatVersion == 1)
        #expect(LogRecord.validators(feed: .posts, etag: nil, lastModified: nil).formatVersion == 1)
    }

    /// Under a version-1 header a type of version 2 is a record version 1
    /// does not know: refused as newer (never cut), like any unknown type.
    @Test(arguments: samples)
    func aVersionTwoTypeIsUnknownInAVersionOneLog(_ record: LogRecord) {
        let payload = RecordCodec.encode(record)[8...]
        #expect(throws: RecordDecodingError.unknown("unknown record type \(RecordCodec.hex(payload.first!))")) {
            try RecordCodec.decodePayload(payload, version: 1)
        }
    }

    /// A string id the writer never writes (empty, over 1 KiB, not UTF-8),
    /// or an id kind past the known ones, is a value this version does not
    /// know: refused, not cut. A list longer than its bytes is damage.
    @Test func idsThisVersionDoesNotWriteAreUnknownAndShortListsAreDamage() {
        func payload(_ type: UInt8, _ id: [UInt8]) -> [UInt8] {
            var p: [UInt8] = [type]
            p.putBytes(id)
            return p
        }
        let unknown: [[UInt8]] = [
            payload(10, []), payload(10, Array(repeating: 0x61, count: 1025)), payload(10, [0xFF, 0xFE]),
            payload(9, [0xC3]) + [0],
            [11, 0, 1, 3, 0],  // postOrder of one id of kind 3
        ]
        for p in unknown {
            do { _ = try RecordCodec.decodePayload(p[...], version: 2); Issue.record("decoded \(p)") } catch {
                #expect(error.kind == .unknown, "\(error)")
            }
        }
        // A postOrder announcing 50 ids in 4 bytes: damage, and no allocation of 50.
        #expect(throws: RecordDecodingError(description: "record ends early")) {
            try RecordCodec.decodePayload([11, 0, 50, 1, 2, 1, 4][...], version: 2)
        }
        #expect(throws: RecordDecodingError.unknown("unknown feed 3 in a page (type 0x0c) record")) {
            try RecordCodec.decodePayload([12, 3, 0][...], version: 2)
        }
    }

    @Test func anOrderIsCutIntoBoundedRecords() {
        let long = (0..<300).map { PostID.string(String(repeating: "x", count: 1000) + "\($0)") }
        let records = PostOrderRecords.records(for: long)
        #expect(records.count > 1)
        var given: [PostID] = []
        for r in records {
            guard case let .postOrder(start, ids) = r else { Issue.record("\(r)"); continue }
            #expect(start == given.count)
            given += ids
            #expect(RecordCodec.encode(r).count < PostOrderRecords.maxBytes + 2048)
        }
        #expect(given == long)
        let many = (0..<10_000).map { PostID.int(Int64($0)) }
        #expect(PostOrderRecords.records(for: many).count == 3, "4,096 ids a record at most")
    }
}

/// Replaying the order and page records: within a transaction they replace
/// what was there (position 0 begins anew); later positions extend.
@Suite struct VersionTwoReplayTests {
    static func post(_ id: PostID) -> LogRecord { .post(id: id, json: Array("\(id)".utf8)) }

    @Test func orderRecordsReplaceTheOrderAndTheRestFollowsAscending() {
        var s = StoreState()
        s.apply(transaction: [Self.post(.int(3)), Self.post(.int(1)), Self.post(.int(2)),
                              .postOrder(start: 0, ids: [.int(3)]), .postOrder(start: 1, ids: [.int(1), .int(2)])])
        s.orderPosts()
        #expect(s.feedIDs == [.int(3), .int(1), .int(2)])
        #expect(s.listIDs == [.int(1), .int(2), .int(3)], "all integers: listed ascending")
        // A new order replaces it; an id it does not name (4) follows, ascending;
        // one it names that is no post (9) is skipped.
        s.apply(transaction: [Self.post(.int(4)), Self.post(.string("b")), .postOrder(start: 0, ids: [.string("b"), .int(9), .int(2)])])
        s.orderPosts()
        #expect(s.feedIDs == [.string("b"), .int(2), .int(1), .int(3), .int(4)])
        #expect(s.listIDs == s.feedIDs, "a string id: listed in feed order")
        // Position 2 on: the first two stay.
        s.apply(transaction: [.postOrder(start: 2, ids: [.int(4)])])
        s.orderPosts()
        #expect(s.recordedOrder == [.string("b"), .int(9), .int(4)])
        #expect(s.feedIDs == [.string("b"), .int(4), .int(1), .int(2), .int(3)])
        // A start past the end appends (the writer never leaves a gap).
        s.apply(transaction: [.postOrder(start: 99, ids: [.int(3)])])
        #expect(s.recordedOrder == [.string("b"), .int(9), .int(4), .int(3)])
    }

    @Test func pageRecordsReplaceAFeedsPagesAndValidatorsReplaceThemToo() {
        var s = StoreState()
        let p = (0..<3).map { FeedPage(url: "u\($0)", validators: Validators(etag: "\"\($0)\""), next: $0 < 2 ? "u\($0 + 1)" : nil, count: $0) }
        s.apply(transaction: [.page(feed: .posts, index: 0, page: p[0]), .page(feed: .posts, index: 1, page: p[1]),
                              .page(feed: .posts, index: 2, page: p[2])])
        #expect(s.pages(of: .posts) == p && s.postsKnown)
        #expect(s.pages(of: .manifest).isEmpty && !s.manifestKnown)
        s.apply(transaction: [.page(feed: .posts, index: 0, page: p[2])])
        #expect(s.pages(of: .posts) == [p[2]], "index 0 begins a new list")
        s.apply(transaction: [.page(feed: .posts, index: 1, page: p[0])])
        #expect(s.pages(of: .posts) == [p[2], p[0]])
        s.apply(transaction: [Self.post(.int(1)), .validators(feed: .posts, etag: "\"v\"", lastModified: nil)])
        #expect(s.pages(of: .posts) == [FeedPage(url: "", validators: Validators(etag: "\"v\""), count: 1)])
        s.apply(transaction: [.page(feed: .manifest, index: 0, page: p[1])])
        #expect(s.manifestKnown && s.pages(of: .manifest) == [p[1]])
    }

    /// A page's unsafe validator (what 0.1.0 stored with a CRLF) is dropped
    /// and names its feed, as a `validators` record's is.
    @Test func damagedPageValidatorsAreDroppedAndNamed() {
        var s = StoreState()
        s.apply(.page(feed: .manifest, index: 0, page: FeedPage(url: "u", validators: Validators(etag: "\"a\"\r\n"), count: 0)))
        #expect(s.pages(of: .manifest)[0].validators == Validators())
        #expect(s.damagedValidators == [.manifest])
        s.apply(.page(feed: .manifest, index: 0, page: FeedPage(url: "u", validators: Validators(etag: "\"a\""), count: 0)))
        #expect(s.damagedValidators.isEmpty)
    }

    /// Compaction's records rebuild string ids, the order and the pages, and
    /// a prefix that stops before the pages leaves the feed unknown.
    @Test func theLiveTransactionsRebuildOrderAndPages() {
        var s = StoreState()
        let ids: [PostID] = (0..<150).map { $0 % 3 == 0 ? .string("s\($0)") : .int(Int64(1000 - $0)) }
        let pages = [FeedPage(url: "a", next: "b", count: 100), FeedPage(url: "b", count: 50)]
        s.apply(transaction: ids.map(Self.post) + PostOrderRecords.records(for: ids)
                + StoreState.pageRecords(.posts, pages) + [.manifestSize(count: 2), .row(row: 1, url: "x", description: nil)]
                + StoreState.pageRecords(.manifest, [FeedPage(url: "m", count: 2)]))
        s.orderPosts()
        #expect(s.feedIDs == ids)
        var rebuilt = StoreState()
        let transactions = s.liveTransactions(chunk: 16)
        for t in transactions { rebuilt.apply(transaction: t) }
        rebuilt.orderPosts()
        #expect(rebuilt.posts == s.posts && rebuilt.feedIDs == ids && rebuilt.listIDs == ids)
        #expect(rebuilt.pages(of: .posts) == pages)
        #expect(rebuilt.pages(of: .manifest) == [FeedPage(url: "m", count: 2)] && rebuilt.rows == s.rows)
        // Without its last transactions (the pages), the posts feed is unknown.
        var prefix = StoreState()
        for t in transactions.prefix(while: { !$0.contains { if case .page = $0 { true } else { false } } }) { prefix.apply(transaction: t) }
        #expect(!prefix.postsKnown && prefix.posts.count == 150)
    }

    /// An ascending order needs no order record: a compacted all-integer
    /// ascending feed is version 1 through and through.
    @Test func anAscendingOrderIsNotRecorded() {
        var s = StoreState()
        s.apply(transaction: [Self.post(.int(2)), Self.post(.int(1)), .validators(feed: .posts, etag: nil, lastModified: nil)])
        s.orderPosts()
        #expect(s.liveTransactions().joined().allSatisfy { $0.formatVersion == 1 })
    }
}

import CacheSystem
import Testing
@testable import CacheStore

/// The replayed index on its own: records in, state out, no files.
@Suite struct StoreStateTests {
    let h = (0..<4).map { Hash128(high: 7, low: UInt64($0)) }

    @Test func postsAreSetRemovedAndSorted() {
        var s = StoreState()
        s.apply(transaction: [.post(id: .int(3), json: Array("c".utf8)), .post(id: .int(-1), json: Array("a".utf8)), .post(id: .int(2), json: Array("b".utf8))])
        s.apply(transaction: [.postRemoved(id: .int(2)), .post(id: .int(3), json: Array("C".utf8))])
        s.orderPosts()
        #expect(s.listIDs == [.int(-1), .int(3)])
        #expect(s.posts[.int(3)] == Array("C".utf8))
        #expect(!s.postsKnown, "posts are known once the feed's validators are logged")
        s.apply(.validators(feed: .posts, etag: nil, lastModified: nil))
        #expect(s.postsKnown && !s.manifestKnown)
    }

    @Test func aRowKeepsItsObjectUntilItsURLChanges() {
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 2), .row(row: 0, url: "a.png", description: "A"), .row(row: 1, url: "b.png", description: nil),
                              .rowObject(row: 0, hash: h[0], size: 10, type: .png)])
        let generation = s.manifestGeneration
        s.apply(.row(row: 0, url: "a.png", description: "new words"))
        #expect(s.rows[0].object?.hash == h[0], "a new description keeps the image")
        #expect(s.manifestGeneration == generation, "and does not change the resolved URLs")
        s.apply(.row(row: 0, url: "c.png", description: nil))
        #expect(s.rows[0].object == nil, "a new URL uncaches the row")
        #expect(s.manifestGeneration > generation)
        #expect(s.objects[h[0]] != nil, "the object stays until it is removed (gc or eviction)")
    }

    @Test func theManifestShrinksAndGrows() {
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 3), .row(row: 2, url: "z", description: nil)])
        #expect(s.rows.count == 3 && s.manifestKnown)
        s.apply(.manifestSize(count: 1))
        #expect(s.rows.map(\.url) == [""])
        s.apply(.row(row: 4, url: "far", description: nil))
        #expect(s.rows.count == 5, "a row past the end grows the manifest with empty rows")
    }

    @Test func bytesCountEachObjectOnceHoweverManyRowsShareIt() {
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 3), .rowObject(row: 0, hash: h[1], size: 100, type: .jpeg),
                              .rowObject(row: 1, hash: h[1], size: 100, type: .jpeg), .rowObject(row: 2, hash: h[2], size: 5, type: .gif)])
        #expect(s.bytes == 105)
        s.apply(.objectRemoved(hash: h[1]))
        #expect(s.bytes == 5)
        #expect(s.rows.map { $0.object?.hash } == [nil, nil, h[2]])
    }

    @Test func useTimesOnlyForKnownObjectsAndOnlyForward() {
        var s = StoreState()
        s.apply(transaction: [.manifestSize(count: 1), .rowObject(row: 0, hash: h[0], size: 1, type: .png)])
        s.apply(transaction: [.access(hash: h[0], time: 50), .access(hash: h[0], time: 20), .access(hash: h[3], time: 99)])
        #expect(s.objects.lastUse(h[0]) == 50, "a later record with an older time does not move it back")
        #expect(s.objects.lastUse(h[3]) == nil, "no use time for an object the index does not hold")
    }

    @Test func damagedValidatorsAreDroppedAndNamed() {
        var s = StoreState()
        s.apply(.validators(feed: .manifest, etag: "\"a\"\r\n", lastModified: "Mon, 30 Nov 2026 11:54:36 GMT"))
        #expect(s.pages(of: .manifest) == [FeedPage(url: "", validators: Validators(etag: nil, lastModified: "Mon, 30 Nov 2026 11:54:36 GMT"), count: 0)])
        #expect(s.damagedValidators == [.manifest])
        s.apply(.validators(feed: .manifest, etag: "\"b\"", lastModified: nil))
        #expect(s.damagedValidators.isEmpty, "clean ones heal the mark")
    }

    @Test func theLiveTransactionsRebuildTheSameState() {
        var s = StoreState()
        s.apply(transaction: [.post(id: .int(1), json: Array("{}".utf8)), .post(id: .int(9), json: Array("[]".utf8)),
                              .validators(feed: .posts, etag: "\"p\"", lastModified: nil)])
        var rows: [LogRecord] = [.manifestSize(count: 130)]
        for i in 0..<130 { rows.append(.row(row: i, url: "\(i % 7).png", description: i % 2 == 0 ? "d\(i)" : nil)) }
        for i in stride(from: 0, to: 130, by: 3) { rows.append(.rowObject(row: i, hash: h[i % 4], size: Int64(i % 4 + 1), type: .png)) }
        rows += [.access(hash: h[0], time: 1234), .access(hash: h[2], time: 99), .validators(feed: .manifest, etag: nil, lastModified: "x")]
        s.apply(transaction: rows)
        s.apply(.postRemoved(id: .int(1)))
        s.orderPosts()

        var rebuilt = StoreState()
        for t in s.liveTransactions(chunk: 16) { rebuilt.apply(transaction: t) }
        rebuilt.orderPosts()
        #expect(rebuilt.posts == s.posts && rebuilt.listIDs == s.listIDs && rebuilt.feedIDs == s.feedIDs)
        #expect(rebuilt.rows == s.rows)
        #expect(rebuilt.objects == s.objects && rebuilt.bytes == s.bytes)
        #expect(rebuilt.objects.lastUses == s.objects.lastUses)
        #expect(rebuilt.pages == s.pages)
        #expect(rebuilt.postsKnown == s.postsKnown && rebuilt.manifestKnown == s.manifestKnown)
    }

    /// A refresh's apply lets each post's copy go as the table takes it in,
    /// and says so after each arena chunk's worth (where the store gives the
    /// heap's free pages back): 40 posts of 1 MiB, two chunks of 16 MiB.
    @Test func applyingAndConsumingSaysWhenEachChunkOfPostsIsFreed() {
        let post = Array(#"{"id":1,"title":""#.utf8) + Array(repeating: UInt8(ascii: "a"), count: (1 << 20) - 20) + Array(#""}"#.utf8)
        var records = (0..<40).map { LogRecord.post(id: .int($0), json: post) }
        var s = StoreState()
        var calls = 0
        s.apply(consuming: &records) { calls += 1 }
        #expect(calls == 2)
        #expect(records.isEmpty)
        #expect(s.posts.count == 40 && s.posts[.int(39)] == post)
    }
}

import Testing
import CacheProtocol
@testable import CachedClient

/// `ListingWalk` (cachectl's `get posts`, the library's `postPages`) against
/// a listing answered here: the requests it sends, what it hands out, a
/// page refused as too long asked again smaller, and a listing that changes
/// between pages refused as `.changed`.
@Suite struct ListingWalkTests {
    /// A listing of posts with these ids, answering as `list_posts` does; a
    /// request for more than `fits` posts is refused as too long.
    struct Listing {
        var ids: [Int]
        var fits = Int.max
        var requests: [ListingWalk.Request] = []

        init(_ ids: [Int], fits: Int = .max) {
            self.ids = ids
            self.fits = fits
        }

        mutating func answer(_ r: ListingWalk.Request) -> JSON {
            requests.append(r)
            let page = Array(ids.dropFirst(r.offset).prefix(r.limit))
            if page.count > fits {
                return .object([("ok", .bool(false)), ("error", .object([("code", .string("bad_request")), ("message", .string("too long")),
                                                                      ("max_limit", .number(String(fits)))]))])
            }
            return .object([("ok", .bool(true)), ("total", .number(String(ids.count))), ("ids", .array(page.map { .number(String($0)) })),
                            ("posts", .array(page.map { .object([("id", .number(String($0)))]) }))])
        }
    }

    /// Walks to the end (or an error): the ids handed out and each page's offset.
    static func walk(_ walk: inout ListingWalk, _ listing: inout Listing,
                     between: (Int, inout Listing) -> Void = { _, _ in }) throws(CachedError) -> (ids: [Int], offsets: [Int]) {
        var ids: [Int] = [], offsets: [Int] = []
        while let r = walk.nextRequest() {
            guard let page = try walk.take(listing.answer(r)) else { continue }
            offsets.append(page.offset)
            ids += (page.ids ?? []).map { Int($0.integer ?? -1) }
            #expect(page.entries.count == page.ids?.count && page.answer["posts"]?.array == page.entries)
            between(offsets.count, &listing)
        }
        return (ids, offsets)
    }

    @Test func pagesOverlapByOneEntryAndHandEachOutOnce() throws {
        var listing = Listing(Array(1...2500))
        var walk = ListingWalk(.posts, pageSize: 999)
        let (ids, offsets) = try Self.walk(&walk, &listing)
        #expect(ids == Array(1...2500) && offsets == [0, 999, 1998])
        #expect(listing.requests.map { [$0.offset, $0.limit] } == [[0, 999], [998, 1000], [1997, 503]])
        #expect(listing.requests.map(\.overlaps) == [false, true, true])
        #expect(walk.isDone && walk.read == 2500 && walk.total == 2500)

        // A part of it: from 995, 1,010 posts; past the end, none, with the total.
        var part = ListingWalk(.posts, pageSize: 999, offset: 995, count: 1010)
        #expect(try Self.walk(&part, &listing).ids == Array(996...2005))
        var past = ListingWalk(.posts, pageSize: 999, offset: 3000, count: 5)
        #expect(try Self.walk(&past, &listing).ids.isEmpty && past.total == 2500 && past.isDone)
        var empty = Listing([])
        var none = ListingWalk(.posts, pageSize: 10)
        #expect(try Self.walk(&none, &empty).offsets == [0] && none.total == 0, "one request, for the total")
    }

    @Test func aPageRefusedAsTooLongIsAskedAgainWithWhatFits() throws {
        var listing = Listing(Array(1...200), fits: 64)
        var walk = ListingWalk(.posts, pageSize: 999)
        #expect(try Self.walk(&walk, &listing).ids == Array(1...200))
        #expect(listing.requests.prefix(4).map { [$0.offset, $0.limit] } == [[0, 999], [0, 64], [63, 137], [63, 64]])

        // Only the entry repeated fits: the next one is asked alone, unchecked.
        var one = Listing(Array(1...5), fits: 1)
        var single = ListingWalk(.posts, pageSize: 999)
        #expect(try Self.walk(&single, &one).ids == Array(1...5))
        #expect(one.requests.map { [$0.offset, $0.limit] } == [[0, 999], [0, 1], [0, 5], [1, 1], [1, 4], [2, 1], [2, 3], [3, 1], [3, 2], [4, 1]])
        #expect(one.requests.filter { $0.limit == 1 }.allSatisfy { !$0.overlaps })

        // Not even one entry fits: the daemon's error.
        var none = Listing(Array(1...5), fits: 0)
        var walk0 = ListingWalk(.posts, pageSize: 999)
        #expect(throws: CachedError(.daemon(.badRequest), "too long")) { try Self.walk(&walk0, &none) }
    }

    @Test func aListingThatChangesBetweenPagesIsChanged() throws {
        // A post deleted: the total moved.
        var deleted = Listing(Array(1...30))
        var walk = ListingWalk(.posts, pageSize: 10)
        do {
            _ = try Self.walk(&walk, &deleted) { page, l in if page == 1 { l.ids.removeAll { $0 == 25 } } }
            Issue.record("no error")
        } catch {
            #expect(error.code == .changed && error.message.contains("30 at first, 29 now; 10 of them were read"), "\(error)")
        }
        // The first two gone, two new at the end: the same total, shifted.
        var shifted = Listing(Array(1...30))
        var walk2 = ListingWalk(.posts, pageSize: 10)
        do {
            _ = try Self.walk(&walk2, &shifted) { page, l in if page == 1 { l.ids = Array(3...32) } }
            Issue.record("no error")
        } catch {
            #expect(error.code == .changed && error.message.contains("the last of the posts read is no longer at position 9"), "\(error)")
        }
        #expect(walk2.read == 10)
    }

    @Test func answersOfAnotherShapeAreMalformed() throws {
        let cases: [(JSON, String)] = [
            (.object([("ok", .bool(true)), ("posts", .array([]))]), "without total and posts"),
            (.object([("ok", .bool(true)), ("total", .number("5")), ("ids", .array([.number("1")])), ("posts", .array([]))]), "1 ids for 0 posts"),
            (.object([("ok", .bool(true)), ("total", .number("5")), ("posts", .array(Array(repeating: .object([]), count: 4)))]), "4 posts when 3 were asked"),
        ]
        for (answer, says) in cases {
            var walk = ListingWalk(.posts, pageSize: 3)
            _ = walk.nextRequest()
            do {
                _ = try walk.take(answer)
                Issue.record("\(says): no error")
            } catch {
                #expect(error.code == .malformed && error.message.contains(says), "\(error)")
            }
        }
    }

    /// Rows are told apart by their URL and description (their number is their place).
    @Test func rowsAreCheckedByTheirURLAndDescription() throws {
        func rows(_ urls: [String], from first: Int) -> JSON {
            .object([("ok", .bool(true)), ("total", .number("4")),
                     ("images", .array(urls.enumerated().map { .object([("row", .number(String(first + $0))), ("url", .string($1)), ("description", .null)]) }))])
        }
        var walk = ListingWalk(.images, pageSize: 2)
        _ = walk.nextRequest()
        #expect(try walk.take(rows(["a", "b"], from: 0))?.entries.count == 2)
        #expect(walk.nextRequest().map { [$0.offset, $0.limit] } == [1, 3])
        #expect(try walk.take(rows(["b", "c", "d"], from: 1))?.entries.map { $0["url"] } == [.string("c"), .string("d")])
        #expect(walk.isDone)
        var moved = ListingWalk(.images, pageSize: 2)
        _ = moved.nextRequest()
        _ = try moved.take(rows(["a", "b"], from: 0))
        _ = moved.nextRequest()
        do {
            _ = try moved.take(rows(["x", "c", "d"], from: 1))
            Issue.record("no error")
        } catch {
            #expect(error.code == .changed && error.message.hasPrefix("the rows changed"), "\(error)")
        }
    }
}

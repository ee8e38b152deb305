import Testing
import CacheProtocol
@_spi(Harness) @testable import CacheDaemon
@testable import CacheService
import CacheSystem

extension JSON {
    fileprivate var intValue: Int? { integer.map { Int($0) } }
}

/// A listing whose answer line would be longer than a client reads is
/// refused before it is written (issue 34, point 2): at exactly the length
/// of the line it would have been, naming `offset` and `limit`, with the
/// number of entries that fit. A small limit stands for the 64 MiB one.
@Suite struct ListingFitTests {
    /// The answer line's length without its `\n`.
    static func length(_ line: [UInt8]) -> Int { line.count - 1 }

    static func error(_ line: [UInt8]?) -> JSON? { line.flatMap { try? JSONParser.parse(Array($0.dropLast())) } }

    @Test(arguments: [nil, Array(#"{"a":[1,2,3]}"#.utf8)] as [[UInt8]?])
    func aPostsPageIsRefusedOnlyPastTheLimitAndSaysHowManyFit(tag: [UInt8]?) throws {
        let page = ListingSizeTests.page
        let written = Self.length(AnswerEncoding.posts(page, tag: tag))
        #expect(AnswerEncoding.postsRefusal(page, offset: 0, tag: tag, limit: written) == nil, "a line of exactly the limit fits")
        #expect(AnswerEncoding.postsRefusal(page, offset: 0, tag: tag) == nil, "far under the real limit")
        let refused = try #require(Self.error(AnswerEncoding.postsRefusal(page, offset: 40, tag: tag, limit: written - 1)))
        #expect(refused["ok"] == .bool(false) && refused["error"]?["code"] == .string("bad_request"))
        if let tag { #expect(refused["tag"] == (try JSONParser.parse(tag))) }
        let message = refused["error"]?["message"]?.string ?? ""
        #expect(message.contains("offset and limit") && message.contains("from offset 40") && message.contains("\(written) bytes"), "\(message)")
        #expect(refused["error"]?["max_limit"]?.intValue == page.posts.count - 1)

        // Every limit down to the answer without posts: max_limit is the longest prefix whose own answer fits.
        let bare = Self.length(AnswerEncoding.posts(PostsPage(total: page.total, ids: [], posts: []), tag: tag))
        for limit in stride(from: written, through: bare, by: -97) {
            let fit = Self.error(AnswerEncoding.postsRefusal(page, offset: 0, tag: tag, limit: limit))?["error"]?["max_limit"]?.intValue ?? page.posts.count
            for k in 0...page.posts.count {
                let prefix = PostsPage(total: page.total, ids: Array(page.ids.prefix(k)), posts: Array(page.posts.prefix(k)))
                #expect((Self.length(AnswerEncoding.posts(prefix, tag: tag)) <= limit) == (k <= fit), "limit \(limit), \(k) posts, \(fit) fit")
            }
        }
    }

    @Test func anImagesPageIsRefusedOnlyPastTheLimitAndSaysHowManyFit() throws {
        let page = ListingSizeTests.images
        let written = Self.length(AnswerEncoding.images(page, tag: nil))
        // The bound counts 512 bytes a row for what is not a string: measured, a line of the limit is not refused.
        #expect(AnswerEncoding.imagesSize(page, tag: nil) - 1 > written)
        #expect(AnswerEncoding.imagesRefusal(page, offset: 0, tag: nil, limit: written) == nil)
        let refused = try #require(Self.error(AnswerEncoding.imagesRefusal(page, offset: 7, tag: nil, limit: written - 1)))
        #expect(refused["error"]?["code"] == .string("bad_request") && refused["error"]?["max_limit"]?.intValue == 2)
        #expect(refused["error"]?["message"]?.string?.contains("ask for fewer rows with offset and limit (from offset 7, at most 2 fit)") == true, "\(refused)")
        let bare = Self.length(AnswerEncoding.images(ImagesPage(total: page.total, images: []), tag: nil))
        for limit in stride(from: written, through: bare, by: -31) {
            let fit = Self.error(AnswerEncoding.imagesRefusal(page, offset: 0, tag: nil, limit: limit))?["error"]?["max_limit"]?.intValue ?? page.images.count
            for k in 0...page.images.count {
                let prefix = ImagesPage(total: page.total, images: Array(page.images.prefix(k)))
                #expect((Self.length(AnswerEncoding.images(prefix, tag: nil)) <= limit) == (k <= fit), "limit \(limit), \(k) rows, \(fit) fit")
            }
        }
    }

    /// At the real limit (64 MiB and a request line): 65 posts of a little
    /// over 1 MiB pass it, 64 do not.
    @Test func aPageOverTheRealLimitIsRefused() throws {
        let body = String(repeating: "b", count: 1 << 20)
        let ids = (1...65).map { PostID.int(Int64($0)) }
        let page = PostsPage(total: 65, ids: ids, posts: ids.map { Array(#"{"id":\#($0),"body":"\#(body)"}"#.utf8) })
        let line = try #require(AnswerEncoding.postsRefusal(page, offset: 0, tag: nil))
        let answer = try JSONParser.parse(Array(line.dropLast()))
        #expect(answer["error"]?["max_limit"]?.intValue == 64, "\(answer)")
        var fits = page
        fits.ids.removeLast()
        fits.posts = fits.posts.prefix(64)
        #expect(AnswerEncoding.postsRefusal(fits, offset: 0, tag: nil) == nil)
    }
}

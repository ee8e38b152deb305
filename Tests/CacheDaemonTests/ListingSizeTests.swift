import Testing
import CacheHTTP
import CacheProtocol
@_spi(Harness) @testable import CacheDaemon
@testable import CacheService
import CacheSystem

/// The sizes the loop grants listings before they are written
/// (`SizedAnswer`, issue 33, point 6): never less than what is then written,
/// and close to it.
@Suite struct ListingSizeTests {
    /// Posts whose ids and bytes are of every kind: integers of every
    /// length and sign, string ids that need escaping.
    static let page: PostsPage = {
        let ids: [PostID] = [.int(0), .int(7), .int(-42), .int(Int64.max), .int(Int64.min), .string("a/b"), .string("q\"\\\n\t\u{1}é")]
        let posts = ids.enumerated().map { i, _ in Array(#"{"id":\#(i),"title":"t\u00e9","body":"\#(String(repeating: "b", count: i * 100))"}"#.utf8) }
        return PostsPage(total: 99, ids: ids, posts: posts)
    }()

    static func object(_ name: String) -> ObjectInfo {
        ObjectInfo(hash: Hash128(high: .max, low: .max), size: .max, mimeType: "image/png", path: "/var/cache/cached/objects/ff/\(name)\"\u{2}")
    }

    /// Rows with every member set at its longest (numbers at 19 digits and a
    /// sign, strings needing escapes), and with none.
    static let images = ImagesPage(total: 3, images: [
        ImageEntry(row: Int.max, url: "https://example.com/a \"quoted\" \u{1f}.png", description: "line\nbreak\ttab\\ é",
                   object: object("a"), lastError: RowError(time: 1_733_338_800.123, reason: "HTTP 404 \"Not Found\"\u{0}", status: Int.min),
                   variant: VariantInfo(object: object("v"), width: Int.max, height: Int.min)),
        ImageEntry(row: 1, url: "", description: nil, object: nil),
        ImageEntry(row: 2, url: "img/2.png", description: "plain", object: object("b")),
    ])

    @Test func postsAnswersAreNeverLargerThanTheirSize() {
        for tag: [UInt8]? in [nil, Array(#"{"a":[1,2,3]}"#.utf8)] {
            let written = AnswerEncoding.posts(Self.page, tag: tag).count
            let size = AnswerEncoding.postsSize(Self.page, tag: tag)
            #expect(size >= written && size - written <= AnswerEncoding.answerAllowance, "\(size) for \(written) bytes")
        }
        let empty = PostsPage(total: 0, ids: [], posts: [])
        #expect(AnswerEncoding.postsSize(empty, tag: nil) >= AnswerEncoding.posts(empty, tag: nil).count)
    }

    @Test func imagesAnswersAreNeverLargerThanTheirSize() {
        let written = AnswerEncoding.images(Self.images, tag: nil).count
        let size = AnswerEncoding.imagesSize(Self.images, tag: nil)
        #expect(size >= written && size - written <= AnswerEncoding.answerAllowance + 3 * AnswerEncoding.imageAllowance, "\(size) for \(written)")
        for e in Self.images.images {
            #expect(AnswerEncoding.imageSize(e) >= AnswerEncoding.imageJSON(e).count)
            #expect(AnswerEncoding.imageSize(e) >= AnswerEncoding.imageJSON(e, withPath: false).count)
        }
    }

    @Test func httpPostsBodiesAreTheirSizeExactly() {
        for withIDs in [false, true] {
            let body = HTTPFrontEnd.postsBody(Self.page, withIDs: withIDs)
            #expect(body.count == HTTPFrontEnd.postsBodySize(Self.page, withIDs: withIDs))
            #expect(body.capacity - body.count < 32, "written into one buffer of its size (malloc rounds it), never grown")
            let items = (try? JSONParser.parse(body))?.array
            #expect(items?.count == Self.page.posts.count)
            if withIDs { #expect(items?.last?["id"] == .string("q\"\\\n\t\u{1}é")) }
        }
        let empty = PostsPage(total: 0, ids: [], posts: [])
        #expect(HTTPFrontEnd.postsBody(empty, withIDs: true) == Array("[]".utf8))
        #expect(HTTPFrontEnd.postsBodySize(empty, withIDs: true) == 2)
    }

    @Test func httpImagesBodiesAreNeverLargerThanTheirSize() {
        for withPaths in [false, true] {
            let body = HTTPFrontEnd.imagesBody(Self.images, withPaths: withPaths)
            #expect(HTTPFrontEnd.imagesBodySize(Self.images) >= body.count)
            #expect((try? JSONParser.parse(body))?.array?.count == 3)
        }
    }
}

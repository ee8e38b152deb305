import CacheProtocol
import CacheService

/// A listing's answer must fit on the line a client reads: the clients
/// refuse an answer line longer than `ProtocolLimits.maxAnswerLine`
/// (67,174,400 bytes without its `\n`; docs/protocol.md, "What the clients
/// refuse"), so an answer that long is never built. `list_posts` and
/// `list_images` whose page would pass it are answered `bad_request`,
/// naming `offset` and `limit` and giving in `error.max_limit` how many
/// entries from that `offset` do fit (issue 34, point 2).
///
/// The page is sized before anything is written: `postsSize` and
/// `imagesSize` bound the answer from above, and only a page whose bound
/// passes the limit is measured exactly (a post's bytes and id are its
/// length already; an image row is written alone to count it), so a page
/// that fits is never refused and one refused never reaches the writer.
extension AnswerEncoding {
    /// The error line refusing a `list_posts` page from `offset` whose answer
    /// line would be longer than `limit` bytes; nil when it fits.
    static func postsRefusal(_ page: PostsPage, offset: Int, tag: [UInt8]?,
                             limit: Int = ProtocolLimits.maxAnswerLine) -> [UInt8]? {
        guard postsSize(page, tag: tag) - 1 > limit else { return nil }
        // The answer with no post: its members, its tag and its total as written.
        var none = page
        none.ids = []
        none.posts = .none
        let bare = posts(none, tag: tag).count - 1
        let entries = page.ids.indices.lazy.map { JSONWriter.length(of: page.ids[$0]) + page.posts.byteCount(at: $0) }
        return refusal(entries, bare: bare, separators: 2, offset: offset, limit: limit, noun: "posts", tag: tag)
    }

    /// The error line refusing a `list_images` page from `offset` whose
    /// answer line would be longer than `limit` bytes; nil when it fits.
    static func imagesRefusal(_ page: ImagesPage, offset: Int, tag: [UInt8]?,
                              limit: Int = ProtocolLimits.maxAnswerLine) -> [UInt8]? {
        guard imagesSize(page, tag: tag) - 1 > limit else { return nil }
        var none = page
        none.images = []
        let bare = images(none, tag: tag).count - 1
        let entries = page.images.lazy.map { imageJSON($0).count }
        return refusal(entries, bare: bare, separators: 1, offset: offset, limit: limit, noun: "rows", tag: tag)
    }

    /// The refusal of a page whose entries take `entries` bytes each in the
    /// answer (each after the first also `separators` commas: one per array
    /// it is in), around `bare` bytes of the answer without them; nil when
    /// the whole line is `limit` bytes or fewer. `max_limit` is the most
    /// entries from `offset` whose answer fits (0: not even the first).
    private static func refusal(_ entries: some Sequence<Int>, bare: Int, separators: Int, offset: Int, limit: Int,
                                noun: StaticString, tag: [UInt8]?) -> [UInt8]? {
        var length = bare
        var fitting = 0
        var count = 0
        for bytes in entries {
            length += bytes + (count > 0 ? separators : 0)
            count += 1
            if length <= limit { fitting = count }
        }
        guard length > limit else { return nil }
        let message = "the answer would be \(length) bytes, longer than the \(limit) bytes of an answer line a client reads: "
            + "ask for fewer \(noun) with offset and limit (from offset \(offset), at most \(fitting) fit)"
        return Response.error(ProtocolError(.badRequest, message), tag: tag, details: { $0.field("max_limit", fitting) })
    }
}

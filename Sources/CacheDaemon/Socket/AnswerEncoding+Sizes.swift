import CacheProtocol
import CacheService
import CacheSystem

/// The most bytes a listing's answer takes, worked out from its page without
/// writing it (the loop grants them before the answer is made:
/// `SizedAnswer`). Strings are counted as `JSONWriter` escapes them; what
/// their writers add around them is bounded by a constant per entry.
extension AnswerEncoding {
    /// At least the bytes of `posts(page, tag:)`: the posts' stored JSON,
    /// their ids, and the members around them.
    static func postsSize(_ page: PostsPage, tag: [UInt8]?) -> Int {
        var n = answerAllowance + (tag?.count ?? 0)
        for id in page.ids { n += JSONWriter.length(of: id) + 1 }
        n += page.posts.totalBytes + page.posts.count
        return n
    }

    /// At least the bytes of `images(page, tag:)`.
    static func imagesSize(_ page: ImagesPage, tag: [UInt8]?) -> Int {
        page.images.reduce(answerAllowance + (tag?.count ?? 0)) { $0 + imageSize($1) + 1 }
    }

    /// At least the bytes of `imageJSON(e)` (with or without its path):
    /// its strings as written, and `imageAllowance` for the rest.
    static func imageSize(_ e: ImageEntry) -> Int {
        var n = imageAllowance + JSONWriter.length(of: e.url) + JSONWriter.length(of: e.description ?? "")
        if let o = e.object { n += JSONWriter.length(of: o.mimeType) + JSONWriter.length(of: o.path) }
        if let f = e.lastError { n += JSONWriter.length(of: f.reason) }
        if let v = e.variant { n += JSONWriter.length(of: v.object.mimeType) + JSONWriter.length(of: v.object.path) }
        return n
    }

    /// An answer line's own members: `{"ok":true,"tag":...,"total":N,` and
    /// the names and brackets of its arrays (under 80 bytes).
    static let answerAllowance = 128

    /// An image row's member names, punctuation, numbers (row, sizes,
    /// width, height, status: 20 digits at most each; a failure's time),
    /// hashes (34 bytes each) and nulls: under 400 bytes with a variant.
    static let imageAllowance = 512
}

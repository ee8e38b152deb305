import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// `/posts` and `/images` answers: their bodies written once into a buffer
/// of their size (no array of items copied into a body, no body copied
/// after its head: the head and the body are sent as two chunks), and the
/// most bytes they take, worked out from the page before they are written
/// (the loop grants them first: `SizedAnswer`).
extension HTTPFrontEnd {
    /// A listing's answer as chunks: the head (`X-Total-Count: total`,
    /// `Content-Length`) and, but for HEAD, the body.
    func listingChunks(_ request: HTTPRequest, total: Int, _ body: [UInt8]) -> [[UInt8]] {
        var h = responses.head(.ok, request)
        h.field("Content-Type", HTTPResponses.json)
        h.field("Content-Length", body.count)
        h.field("X-Total-Count", total)
        let head = h.finish()
        return request.method == .head || body.isEmpty ? [head] : [head, body]
    }

    /// A listing's page as a `SizedAnswer`: `bodySize` bytes of body at
    /// most and its head, written by `make`, refused with a 503.
    func sized<V: Sendable>(_ request: HTTPRequest, bodySize: @escaping @Sendable (V) -> Int,
                            _ make: @escaping @Sendable (V) -> [[UInt8]]) -> @Sendable (V) -> SizedAnswer {
        { [responses] page in
            SizedAnswer(bytes: Self.headAllowance + bodySize(page), make: { make(page) }, refuse: { limit in
                let e = ProtocolError(limit)
                return responses.error(.unavailable, e.code, e.message, request) { $0.field("Retry-After", 1) }
            })
        }
    }

    /// The body of `/posts`: the stored posts as a JSON array, or, `withIDs`,
    /// each as `{"id":<id>,"post":<stored JSON>}` (`get_post`'s answer without `ok`).
    static func postsBody(_ p: PostsPage, withIDs: Bool) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(postsBodySize(p, withIDs: withIDs))
        for i in p.posts.indices {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            guard withIDs else { p.posts.withBytes(at: i) { out.append(contentsOf: $0) }; continue }
            var w = JSONWriter(capacity: 32)
            w.raw(#"{"id":"#)
            w.postID(p.ids[i])
            w.raw(#","post":"#)
            out.append(contentsOf: w.bytes)
            p.posts.withBytes(at: i) { out.append(contentsOf: $0) }
            out.append(UInt8(ascii: "}"))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// The bytes of `postsBody(p, withIDs:)`.
    static func postsBodySize(_ p: PostsPage, withIDs: Bool) -> Int {
        var n = 2 + max(0, p.posts.count - 1)
        n += p.posts.totalBytes
        if withIDs { for id in p.ids { n += JSONWriter.length(of: id) + 15 } }
        return n
    }

    /// The body of `/images`: the rows as `list_images` gives them (without
    /// their store paths unless `withPaths`), each written as it is made.
    static func imagesBody(_ p: ImagesPage, withPaths: Bool) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(imagesBodySize(p))
        for (i, e) in p.images.enumerated() {
            if i > 0 { out.append(UInt8(ascii: ",")) }
            out.append(contentsOf: AnswerEncoding.imageJSON(e, withPath: withPaths))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// At least the bytes of `imagesBody(p, withPaths:)`.
    static func imagesBodySize(_ p: ImagesPage) -> Int {
        p.images.reduce(2) { $0 + AnswerEncoding.imageSize($1) + 1 }
    }

    /// A listing's head: the fields every answer has, the type, the length
    /// and the total (under 400 bytes).
    static let headAllowance = 1024
}

import CacheSystem

/// The JSON of a page of posts, lent from the store's arena: the page holds
/// the arena's chunks (shared, not copied) and where each post lies in
/// them, some 12 bytes a post. A listing waiting to be written therefore
/// costs its posts' places, not a second copy of their bytes (200
/// connections each waiting for a 20 MB listing held 4 GB as copies). A
/// chunk the store changes meanwhile is copied once by the store, as any
/// value shared with a reader is.
///
/// As a collection each element is a copy of one post's bytes, for
/// callers that want arrays; writers use `withBytes(at:_:)` and
/// `byteCount(at:)`, which copy nothing.
public struct PostBodies: Sendable, RandomAccessCollection {
    private let chunks: [[UInt8]]
    private var spans: [PostArena.Span]

    /// Posts given as arrays (a test's page, a page built elsewhere).
    public init(_ posts: [[UInt8]]) {
        chunks = posts
        spans = posts.indices.map { PostArena.Span(chunk: UInt32($0), offset: 0, count: UInt32(posts[$0].count)) }
    }

    init(chunks: [[UInt8]], spans: [PostArena.Span]) {
        self.chunks = chunks
        self.spans = spans
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { spans.count }

    /// A copy of post `i`'s bytes.
    public subscript(i: Int) -> [UInt8] { withBytes(at: i) { Array($0) } }

    /// The bytes of post `i`, lent to `body`.
    public func withBytes<R>(at i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        let s = spans[i]
        return chunks[Int(s.chunk)].withUnsafeBytes { all in
            body(UnsafeRawBufferPointer(rebasing: all[Int(s.offset)..<Int(s.offset) + Int(s.count)]))
        }
    }

    /// How many bytes post `i` has.
    public func byteCount(at i: Int) -> Int { Int(spans[i].count) }

    /// The bytes of every post of the page together.
    public var totalBytes: Int { spans.reduce(0) { $0 + Int($1.count) } }

    /// How many chunks the page holds on to (tests).
    var lentChunks: Int { chunks.count }

    /// The first `k` posts.
    public func prefix(_ k: Int) -> PostBodies {
        PostBodies(chunks: chunks, spans: Array(spans.prefix(k)))
    }

    /// No post.
    public static let none = PostBodies([])
}

extension PostBodies: Equatable {
    /// The same posts, byte for byte, in the same order.
    public static func == (a: PostBodies, b: PostBodies) -> Bool {
        a.count == b.count && a.indices.allSatisfy { i in
            a.withBytes(at: i) { x in b.withBytes(at: i) { y in x.elementsEqual(y) } }
        }
    }
}

/// A page of posts as the store lends it: how many there are in all, and
/// the page's ids with their bytes.
public struct StoredPostsPage: Sendable {
    public var total: Int
    public var ids: [PostID]
    public var bodies: PostBodies
}

import CacheProtocol
import CacheSystem

/// `list_posts`'s `query`: the posts whose title holds a text, ignoring
/// case (docs/protocol.md, `list_posts`). A post's title is its `title`
/// member when that is a string, or `title.rendered` (WordPress); without
/// a `title`, its `name` (Lemmy), `record.text` (Bluesky) or `text` (Slack,
/// X); a post without any matches no query. A scan of every post's title in
/// memory (`TitleIndex`): the service runs it on a worker once the store
/// holds more than `CacheService.inlineListLimit` posts.
struct PostSearch: Sendable {
    /// The query, lowercased once, as UTF-8.
    let needle: [UInt8]

    init(_ query: String) { needle = Array(query.lowercased().utf8) }

    /// The matches among the posts `index` lists (in list order): their
    /// number, and the ids of those from `offset`, at most `limit`.
    func matches(in index: TitleIndex, offset: Int, limit: Int?) -> (total: Int, ids: [PostID]) {
        var total = 0
        var ids: [PostID] = []
        let end = limit.map { offset + $0 } ?? Int.max
        for entry in index.entries where Self.contains(entry.title, needle) {
            if total >= offset && total < end { ids.append(entry.id) }
            total += 1
        }
        return (total, ids)
    }

    /// Whether `haystack` holds the bytes of `needle` (both lowercased
    /// UTF-8, so a match of bytes is a match of text). Byte for byte:
    /// `String.contains` costs about 100 times as much.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard let first = needle.first else { return true }
        guard haystack.count >= needle.count else { return false }
        return haystack.withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                var i = 0
                let last = h.count - n.count
                while i <= last {
                    if h[i] == first {
                        var j = 1
                        while j < n.count && h[i + j] == n[j] { j += 1 }
                        if j == n.count { return true }
                    }
                    i += 1
                }
                return false
            }
        }
    }
}

/// Every post's id and title, lowercased, in list order, as of one
/// `Store.postsGeneration` (which changes with the posts and their order):
/// a search compares bytes instead of parsing every post, and reads the
/// JSON of the page's matches alone (50,000 posts: about 2 MB of titles,
/// built once per change of the posts). Lowercased UTF-8, compared byte
/// for byte.
struct TitleIndex: Sendable {
    /// The posts generation it was built at (-1: never built).
    var generation = -1
    /// A post without a title has an empty one, which matches nothing.
    var entries: [(id: PostID, title: [UInt8])] = []

    init() {}

    init(generation: Int, posts: [(id: PostID, json: [UInt8])]) {
        self.generation = generation
        entries = posts.map { ($0.id, Self.title($0.json).map { Array($0.lowercased().utf8) } ?? []) }
    }

    /// A post's title: `title` as a string, or `title.rendered`.
    static func title(_ json: [UInt8]) -> String? {
        // Stored posts were parsed when fetched; one that is not JSON has no title to match.
        guard let post = try? JSONParser.parse(json) else { return nil }
        if let title = post["title"] { return title.string ?? title["rendered"]?.string }
        // Feeds without a title: Lemmy's `name`, Bluesky's `record.text`, Slack's and X's `text`.
        return post["name"]?.string ?? post["record"]?["text"]?.string ?? post["text"]?.string
    }
}

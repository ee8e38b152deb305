import CacheProtocol
import CacheSystem

/// `list_posts`'s `query`: the posts whose title holds a text, ignoring
/// case (docs/protocol.md, `list_posts`). A post's title is its `title`
/// member when that is a string, or `title.rendered` (WordPress); a post
/// without either matches no query. A scan of every post in memory: the
/// service runs it on a worker once the store holds more than
/// `CacheService.inlineListLimit` posts.
struct PostSearch: Sendable {
    /// The query, lowercased once.
    let needle: String
    /// Its bytes, ASCII lowercase, when it is all ASCII: for the prefilter.
    let asciiNeedle: [UInt8]?

    init(_ query: String) {
        needle = query.lowercased()
        asciiNeedle = needle.utf8.allSatisfy { $0 < 0x80 } ? Array(needle.utf8) : nil
    }

    /// Whether the post `json` is a match.
    func matches(_ json: [UInt8]) -> Bool {
        // A post of plain ASCII without escapes holds its title's text as
        // it is: one that does not hold the needle anywhere (ASCII case
        // aside) cannot hold it in its title, and is not parsed.
        if let ascii = asciiNeedle, json.allSatisfy({ $0 < 0x80 && $0 != UInt8(ascii: "\\") }),
           !Self.contains(json, ascii) {
            return false
        }
        guard let title = Self.title(json) else { return false }
        return title.lowercased().contains(needle)
    }

    /// The matches among `posts` (in their order): the total, and the page
    /// from `offset`, at most `limit`.
    func page(of posts: [(id: PostID, json: [UInt8])], offset: Int, limit: Int?) -> PostsPage {
        var total = 0
        var ids: [PostID] = [], jsons: [[UInt8]] = []
        let end = limit.map { offset + $0 } ?? Int.max
        for p in posts where matches(p.json) {
            if total >= offset && total < end {
                ids.append(p.id)
                jsons.append(p.json)
            }
            total += 1
        }
        return PostsPage(total: total, ids: ids, posts: jsons)
    }

    /// Whether `haystack` holds `needle` (lowercase ASCII), ignoring ASCII case.
    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard !needle.isEmpty else { return true }
        guard haystack.count >= needle.count else { return false }
        return haystack.withUnsafeBufferPointer { h in
            needle.withUnsafeBufferPointer { n in
                let first = n[0]
                for i in 0...(h.count - n.count) where lower(h[i]) == first {
                    var j = 1
                    while j < n.count, lower(h[i + j]) == n[j] { j += 1 }
                    if j == n.count { return true }
                }
                return false
            }
        }
    }

    /// `b` with A-Z made a-z.
    @inline(__always) static func lower(_ b: UInt8) -> UInt8 { b &- 0x41 < 26 ? b | 0x20 : b }

    /// A post's title: `title` as a string, or `title.rendered`.
    static func title(_ json: [UInt8]) -> String? {
        guard let post = try? JSONParser.parse(json), let title = post["title"] else { return nil }
        return title.string ?? title["rendered"]?.string
    }
}

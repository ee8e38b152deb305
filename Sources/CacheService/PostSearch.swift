/// `list_posts`'s `query`: the posts whose title holds a text, ignoring
/// case (docs/protocol.md, `list_posts`). A post's title is its `title`
/// member when that is a string, or `title.rendered` (WordPress); without
/// a `title`, its `name` (Lemmy), `record.text` (Bluesky) or `text` (Slack,
/// X); a post without any matches no query. The store finds each post's
/// title when it stores the post (`PostTitle`, in CacheStore) and scans
/// them in place (`Store.searchPosts`): nothing is built at the first
/// search, and a search is ready as soon as the store is open.
struct PostSearch: Sendable {
    /// The query, lowercased once, as UTF-8.
    let needle: [UInt8]

    init(_ query: String) { needle = Array(query.lowercased().utf8) }
}

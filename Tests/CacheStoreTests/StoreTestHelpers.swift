import Testing
@testable import CacheStore
import CacheSystem

/// A feed of one page of unknown URL with these validators: what a
/// version-1 store holds of a feed, and what needs no version 2.
func onePage(_ validators: Validators = Validators(), count: Int) -> [FeedPage] {
    [FeedPage(url: "", validators: validators, next: nil, count: count)]
}

/// The shapes of a version-1 store's refreshes, for the tests about
/// something else (files, trust, compaction): integer ids, one page.
extension Store {
    /// `replacePosts` of integer ids as one page of unknown URL (`onePage`).
    func replacePosts(_ posts: [(id: Int64, json: [UInt8])], validators: Validators) throws(StoreError) -> PostsChange {
        try replacePosts(posts.map { (PostID.int($0.id), $0.json) }, pages: onePage(validators, count: posts.count))
    }

    /// `replaceManifest` as one page of unknown URL (`onePage`).
    @discardableResult
    func replaceManifest(_ rows: [(url: String, description: String?)], validators: Validators) throws(StoreError) -> Int {
        try replaceManifest(rows, pages: onePage(validators, count: rows.count))
    }

    /// The first page's validators (a version-1 store's feed validators).
    func validators(for feed: Feed) -> Validators {
        (feed == .posts ? postPages : manifestPages).first?.validators ?? Validators()
    }

    /// Post `id`, an integer id.
}

/// A table of posts written as a dictionary, for tests.
extension PostTable: ExpressibleByDictionaryLiteral {
    public init(dictionaryLiteral elements: (PostID, [UInt8])...) {
        self.init()
        for (id, json) in elements { set(id, json) }
    }
}

/// An object writer of `store` holding `bytes`, ready to commit.
func objectWriter(holding bytes: [UInt8], in store: Store) throws -> ObjectWriter {
    let w = try store.newObjectWriter(maxSize: 1 << 20)
    try bytes.withUnsafeBytes { try w.append($0) }
    return w
}

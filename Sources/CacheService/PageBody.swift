import CacheSystem

/// The body of one fetched feed page, held for whoever decodes it, who
/// takes it out (`take`): from then the bytes have one owner, so a decoder
/// can give the pages it has read back to the kernel while it reads on
/// (`FeedDecoder.postsPage(consuming:)`: a million-post document is not
/// resident beside the posts copied out of it; issue 34).
final class PageBody: Sendable {
    /// The body's size, known also once it is taken.
    let count: Int
    /// The URL that answered (after any redirect): what the document's
    /// relative URLs resolve against (RSS and Atom's, for their items);
    /// nil when not known.
    let url: String?
    private let bytes: Locked<[UInt8]>

    init(_ bytes: consuming [UInt8], url: String? = nil) {
        count = bytes.count
        self.url = url
        self.bytes = Locked(bytes)
    }

    /// The bytes, moved out: the page holds none after this (a second take gets none).
    func take() -> [UInt8] {
        bytes.withLock { held in
            var out: [UInt8] = []
            swap(&out, &held)
            return out
        }
    }
}

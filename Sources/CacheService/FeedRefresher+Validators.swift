import CacheProtocol
import CacheFetch
import CacheStore
import CacheSystem

/// What revalidating each feed may send.
struct FeedRevalidation: Sendable {
    /// Feeds whose URL changed (a reload): their stored validators belong to
    /// the old URL, so the next fetch sends none.
    var unvalidated: Set<Feed> = []
    /// Feeds whose origin answered `If-None-Match` with a full 200 carrying
    /// the very ETag that was sent: it cannot match its own tags (Apache's
    /// mod_deflate appends `-gzip` to the ETag and then does not recognise
    /// it, Apache bug 45023). For these only Last-Modified is sent, so the
    /// next refresh is answered 304 instead of downloading the feed again;
    /// the store keeps the mark (`Validators.etagIgnored`) across restarts.
    var unmatchedETags: Set<Feed> = []

    mutating func urlChanged(_ feed: Feed) {
        unvalidated.insert(feed)
        unmatchedETags.remove(feed)
    }
}

/// Feed refreshes' conditional requests (docs/protocol.md, "Feeds").
extension FeedRefresher {
    static func conditionalHeaders(_ v: Validators) -> [String] {
        var h: [String] = []
        if let e = v.etag, !v.etagIgnored { h.append("If-None-Match: \(e)") }
        if let m = v.lastModified { h.append("If-Modified-Since: \(m)") }
        return h
    }

    /// What to store from a full answer to a request that sent `sent`.
    func validatorsToStore(_ feed: Feed, setting: String, sent: Validators, response: HTTPResponse) -> Validators {
        var v = Validators(etag: response.headers["etag"], lastModified: response.headers["last-modified"])
        // A 304 rightly echoes the ETag; only a full answer to it is the fault.
        if response.status != 304, let tag = sent.etag, tag == v.etag, v.lastModified != nil {
            let first = revalidation.withLock { $0.unmatchedETags.insert(feed).inserted }
            if first {
                log.notice("\(setting) answered If-None-Match \(tag) with a full 200 and the same ETag; using Last-Modified alone for it from now on")
            }
        }
        let ignored = revalidation.withLock { r -> Bool in
            if sent.etagIgnored { r.unmatchedETags.insert(feed) }
            return r.unmatchedETags.contains(feed)
        }
        if v.lastModified != nil, ignored { v.etag = Validators.ignoredETag }
        return v
    }

    /// One feed: its setting's name, its URL now, and where its state lives.
    struct FeedFetch: Sendable {
        var setting: String
        var url: String?
        var feed: Feed
    }
}

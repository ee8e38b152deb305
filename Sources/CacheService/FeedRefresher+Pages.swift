import CacheFetch
import CacheStore
import CacheSystem

/// One page as a refresh found it.
enum PageResult<Decoded: Sendable>: Sendable {
    /// The origin answered 304 to the page's stored validators: the stored
    /// page (its items, its next link) stands.
    case unchanged(FeedPage)
    /// A full answer, decoded; `page.count` is not known yet (the caller
    /// sets it once repeated items are dropped).
    case fresh(FeedPage, Decoded)

    var page: FeedPage {
        switch self {
        case .unchanged(let p), .fresh(let p, _): p
        }
    }
}

/// A walk over a feed's pages: where it starts, how pages are decoded and
/// what was stored of them last time.
struct PageWalk<Decoded: Sendable>: Sendable {
    var fetch: FeedRefresher.FeedFetch
    var shape: FeedShape
    /// The pages as stored: matched to the pages met by URL (a version-1
    /// store's one page, URL "", stands for the first).
    var stored: [FeedPage]
    var force: Bool
    /// Decodes a full page (its body, to take, `Content-Type` and the items
    /// the walk has room for: more throw); returns it and what paging reads from it.
    var decode: @Sendable (PageBody, String?, Int) throws(FeedError) -> (Decoded, PageFacts)
    /// The validators to store for a page, from those sent and the answer.
    var validatorsToStore: @Sendable (Validators, HTTPResponse) -> Validators
    /// When set, the walk ends after the first page this accepts (a history
    /// feed's page of nothing new: `posts-keep`).
    var stopAfter: (@Sendable (PageResult<Decoded>) -> Bool)?
}

/// Paged feeds (docs/protocol.md, "Feeds", "Pages", "Paging"): the walk
/// itself is `FeedWalker`; the refresher gives it the network and its state.
extension FeedRefresher {
    /// Walks every page of `walk` and hands over the pages in order, or
    /// the first failure (nothing is stored here).
    func fetchPages<D>(_ walk: PageWalk<D>, completion: @escaping @Sendable (Result<WalkResult<D>, CacheError>) -> Void) {
        guard walk.fetch.url != nil else {
            onWorker { completion(.failure(.notConfigured(setting: walk.fetch.setting))) }
            return
        }
        let ignoreFirstStored = revalidation.withLock { $0.unvalidated.remove(walk.fetch.feed) != nil }
        let config = settings()
        let (limit, timeout) = (Int(config.feedMaxSize), config.feedTimeout)
        var walk = walk
        let decode = walk.decode
        let stop = store.stopFlag
        let name = walk.fetch.feed == .posts ? "posts" : "manifest"
        walk.decode = { [log] body, type, room throws(FeedError) in
            // Where a long refresh is: the page has arrived and is being read.
            log.debug("\(name) page of \(body.count) bytes received; reading it")
            // A large page's parse gives up when the daemon stops (within a few thousand items).
            let decoded = try StopFlag.$current.withValue(stop) {
                Result { () throws(FeedError) in try decode(body, type, room) }
            }.get()
            // A large page's parse tree (hundreds of bytes an item) is freed on
            // whichever worker decoded it, in that thread's malloc arena: unless
            // it goes back now, each page's stays resident beside the next one's.
            // At most once a second: the trim holds malloc's lock while it walks the heap.
            if body.count >= Self.trimmedPage, Self.lastPageTrim.withLock({ last in
                guard Clock.elapsed(since: last) >= .seconds(1) else { return false }
                last = Clock.monotonicNanoseconds()
                return true
            }) { Memory.returnFreePages() }
            return decoded
        }
        FeedWalker(walk: walk, fetcher: pages, pageLimit: limit, ignoreFirstStored: ignoreFirstStored, timeout: timeout).run { [self] result in
            // The walk ends inside the last page's handling, on its stack (the
            // page's answer, what its decode held): what follows (the store, a
            // million post files) runs as a job of its own once that has returned.
            onWorker { [self] in finishWalk(result, completion) }
        }
    }

    /// Hands a walk's result on and asks for the heap to be trimmed after a large one.
    private func finishWalk<D>(_ result: Result<WalkResult<D>, OriginFailure>, _ completion: @escaping @Sendable (Result<WalkResult<D>, CacheError>) -> Void) {
        var large = true
        if case .success(let walked) = result { large = walked.bytes >= Memory.largeBody }
        completion(result.mapError { originFailure($0) })
        // A large walk's memory (its bodies, the parser's, what was decoded
        // and stored) goes back to the system once everything here has let
        // go of it: within a second, on the access-time thread, not on a
        // worker now (this task's closures still hold the pages, and a
        // trim on the other worker could run before they are freed). A
        // failed walk's too.
        if large { largeWalkEnded() }
    }

    /// Pages at least this large give their parse's memory back once decoded.
    static let trimmedPage = 1 << 20
    /// When a page last gave its memory back (`Clock.monotonicNanoseconds`).
    private static let lastPageTrim = Locked<UInt64>(0)

    /// The stored items of each page that answered 304: page k's are the
    /// `count` items after the stored pages before it (by the stored order).
    static func storedSlices(_ stored: [FeedPage]) -> [String: Range<Int>] {
        var out: [String: Range<Int>] = [:]
        var offset = 0
        for (i, p) in stored.enumerated() {
            let r = offset..<offset + p.count
            out[p.url] = r
            if i == 0, p.url.isEmpty { out[""] = r }
            offset += p.count
        }
        return out
    }
}

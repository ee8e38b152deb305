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
    var fetch: CacheService.FeedFetch
    var shape: FeedShape
    /// The pages as stored: matched to the pages met by URL (a version-1
    /// store's one page, URL "", stands for the first).
    var stored: [FeedPage]
    var force: Bool
    /// Decodes a full page; returns it and the next page's URL as the
    /// document names it (unresolved), if it does.
    var decode: @Sendable ([UInt8]) throws(FeedError) -> (Decoded, next: String?)
}

/// Paged feeds (docs/protocol.md, "Feeds", "Pages"): each page fetched in
/// turn with its own stored validators, until a page names no next one.
extension CacheService {
    /// Walks every page of `walk`, one request at a time, and hands over
    /// the pages in order, or the first failure (nothing is stored here).
    func fetchPages<D>(_ walk: PageWalk<D>, completion: @escaping @Sendable (Result<[PageResult<D>], CacheError>) -> Void) {
        guard let first = walk.fetch.url else {
            pool.submit { completion(.failure(.notConfigured(setting: walk.fetch.setting))) }
            return
        }
        let ignoreFirstStored = revalidation.withLock { $0.unvalidated.remove(walk.fetch.feed) != nil }
        fetchPage(walk, url: first, done: [], seen: [], bytes: 0, ignoreFirstStored: ignoreFirstStored, completion: completion)
    }

    /// The body bytes one refresh reads from all its pages together, at
    /// most: 16 times `max-object-size` (1 GiB by default). Each page is
    /// bounded by `max-object-size`; this bounds the whole walk, whose
    /// decoded items stay in memory until the feed is stored.
    static let maxFeedBodies = 16

    private func fetchPage<D>(_ walk: PageWalk<D>, url: String, done: [PageResult<D>], seen: Set<String>, bytes: Int, ignoreFirstStored: Bool,
                              completion: @escaping @Sendable (Result<[PageResult<D>], CacheError>) -> Void) {
        let subject = walk.fetch.setting + (done.isEmpty ? "" : " page \(done.count + 1)")
        guard !seen.contains(url) else {
            pool.submit { [self] in completion(.failure(pageFailure(subject, url, "the pages loop: page \(done.count) links to \(url), which was already fetched"))) }
            return
        }
        guard done.count < walk.shape.maxPages else {
            pool.submit { [self] in completion(.failure(pageFailure(subject, url, "more than \(walk.shape.setting("max-pages")) \(walk.shape.maxPages) pages; page \(done.count + 1) would be \(url)"))) }
            return
        }
        let stored = walk.stored.first { $0.url == url }
            ?? (done.isEmpty && !ignoreFirstStored ? walk.stored.first { $0.url.isEmpty } : nil)
        let sent = walk.force ? Validators() : (stored?.validators.sanitized ?? Validators())
        let limit = Int(feeds.withLock { $0.maxObjectSize })
        let sink = MemorySink(limit: limit)
        let request = FetchRequest(url: url, headers: Self.conditionalHeaders(sent), maxBodySize: Int64(limit))
        http.fetch(request, into: sink) { [self] result in
            pool.submit { [self] in
                let response: HTTPResponse
                switch result {
                case .failure(let e): completion(.failure(originFailure(OriginFailure(subject: "\(subject) \(url)", e)))); return
                case .success(let r): response = r
                }
                let page: PageResult<D>
                do throws(CacheError) {
                    page = try pageResult(walk, subject: subject, url: url, response: response, body: sink.bytes, sent: sent, stored: stored)
                } catch {
                    completion(.failure(error)); return
                }
                let total = bytes + sink.bytes.count
                if sink.bytes.count >= Memory.largeBody { sink.reset(); Memory.returnFreePages() }
                let all = done + [page]
                guard let next = page.page.next else { completion(.success(all)); return }
                let (product, overflow) = limit.multipliedReportingOverflow(by: Self.maxFeedBodies)
                let bound = overflow ? Int.max : product
                guard total <= bound else {
                    completion(.failure(pageFailure(subject, url, "the pages so far hold \(formatSize(Int64(total))) of JSON, more than \(Self.maxFeedBodies) times max-object-size (\(formatSize(Int64(bound)))) in all")))
                    return
                }
                fetchPage(walk, url: next, done: all, seen: seen.union([url]), bytes: total, ignoreFirstStored: ignoreFirstStored, completion: completion)
            }
        }
    }

    /// What one answer makes of a page: the stored page on a 304, else the
    /// decoded body with the next page's URL resolved against this page's.
    private func pageResult<D>(_ walk: PageWalk<D>, subject: String, url: String, response: HTTPResponse, body: [UInt8],
                               sent: Validators, stored: FeedPage?) throws(CacheError) -> PageResult<D> {
        if response.status == 304 {
            guard var page = stored, sent != Validators() else {
                throw pageFailure(subject, url, "answered 304 Not Modified to a request that sent no validators", response)
            }
            page.url = url
            // The body is unchanged, but a Link header may name a page that
            // is new since (an oldest-first API whose last page filled up).
            if let link = response.headers["link"].flatMap(LinkHeader.next),
               let resolved = FeedDecoder.resolve(link, base: response.url) { page.next = resolved }
            return .unchanged(page)
        }
        let decoded: (D, next: String?)
        do throws(FeedError) { decoded = try walk.decode(body) } catch { throw pageFailure(subject, url, error.description, response) }
        // The document's own next link first (posts-next, next_url), else the
        // Link header's, resolved against the URL that answered (a redirect's).
        let written = decoded.next ?? response.headers["link"].flatMap(LinkHeader.next)
        var next: String?
        if let written {
            guard let resolved = FeedDecoder.resolve(written, base: response.url) else {
                throw pageFailure(subject, url, "its next page's link \(written) is not an http or https URL", response)
            }
            next = resolved
        }
        let validators = validatorsToStore(walk.fetch.feed, setting: walk.fetch.setting, sent: sent, response: response)
        return .fresh(FeedPage(url: url, validators: validators, next: next, count: 0), decoded.0)
    }

    /// A page that failed: counted as an origin failure, naming the page
    /// (`posts-url URL` for the first, `posts-url page 3 URL` for a later one).
    func pageFailure(_ subject: String, _ url: String, _ reason: String, _ response: HTTPResponse? = nil) -> CacheError {
        originFailure(OriginFailure(subject: "\(subject) \(url)", url: url, attempts: response?.attempts ?? 1, reason: reason))
    }

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

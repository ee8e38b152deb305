import CacheFetch
import CacheHTTP
import CacheStore
import CacheSystem

/// One GET of a feed page into memory: all the walk needs of the network.
protocol PageFetching: Sendable {
    /// Fetches `request`; the completion gets the answer and its body, on
    /// a thread that may do the walk's work (decoding).
    func fetchPage(_ request: FetchRequest, completion: @escaping @Sendable (Result<(HTTPResponse, PageBody), FetchError>) -> Void)
}

/// What a walk found: its pages in order, and whether the last page it read
/// said there is more than the settings follow.
struct WalkResult<Decoded: Sendable>: Sendable {
    var pages: [PageResult<Decoded>]
    /// The warning of the page the walk ended on (`MoreHint`).
    var warning: WalkWarning
    /// True when the walk stopped at a page `PageWalk.stopAfter` accepted
    /// (a history feed's first page of nothing new), not at the feed's end.
    var stoppedEarly = false
    /// The body bytes of every page read.
    var bytes = 0
}

/// What the last page of a walk says of more pages.
enum WalkWarning: Sendable, Equatable {
    /// It names no more pages than were followed.
    case none
    /// Page `page` has more that the settings do not follow.
    case more(MoreHint, page: Int)
    /// It answered 304: the warning of the walk that read it stands.
    case asBefore

    /// The warning's text for the feed whose settings start with `prefix`
    /// (a walk shared by both feeds warns each in its own words).
    func text(feed prefix: String) -> String? {
        if case .more(let hint, let page) = self { return hint.warning(feed: prefix, page: page) }
        return nil
    }
}

/// The feed walk (docs/protocol.md, "Pages" and "Paging"): each page
/// fetched with its own stored validators, its next request made by the
/// feed's `Paging` from the page before it, until a page names no next one.
/// It stores nothing; the first failure ends it and is returned.
struct FeedWalker<Decoded: Sendable>: Sendable {
    var walk: PageWalk<Decoded>
    var fetcher: any PageFetching
    /// The body bytes one page may have (`feed-max-size`).
    var pageLimit: Int
    /// True when the first page's stored validators belong to another URL (a reload changed it).
    var ignoreFirstStored = false
    /// The longest the whole walk may take (`feed-timeout`): no page is
    /// asked for past it. A page under way when it passes is bounded by the
    /// transfer's own `timeout`.
    var timeout: Duration = FeedConfiguration.defaultFeedTimeout

    /// The body bytes one walk reads from all its pages together, at most:
    /// this many times `pageLimit`.
    static var maxFeedBodies: Int { 16 }

    /// The longest next-page URL followed: servers refuse far shorter ones
    /// (8 KiB is nginx's and Apache's default request line), and each is
    /// stored with its page.
    static var maxURLBytes: Int { 8192 }

    /// The state carried from one page to the next.
    private struct Progress: Sendable {
        var pages: [PageResult<Decoded>] = []
        /// Each URL fetched, with its page number (from 1).
        var fetched: [String: Int] = [:]
        var bytes = 0
        /// The digest of the last page that was read (not 304).
        var lastDigest: Int?
        /// The most items a page read so far held.
        var largest = 0
        /// The items of every page so far (a 304 page's as stored).
        var items = 0
        /// When the walk began (`Clock.monotonicNanoseconds`).
        var started = Clock.monotonicNanoseconds()
    }

    /// One page asked for: its URL, the validators sent, and the page as
    /// stored that they came from (matched by URL; for the first page, a
    /// version-1 store's page of no URL too).
    private struct Asked: Sendable {
        var url: String
        var sent: Validators
        var stored: FeedPage?
    }

    /// What a step hands on: the pages or the first failure.
    typealias WalkCompletion = @Sendable (Result<WalkResult<Decoded>, OriginFailure>) -> Void

    /// Walks the feed from its first URL; `completion` gets the pages or the first failure.
    func run(completion: @escaping WalkCompletion) {
        guard let configured = walk.fetch.url else {
            completion(.failure(OriginFailure(subject: walk.fetch.setting, url: "", attempts: 0, reason: "\(walk.fetch.setting) is not configured")))
            return
        }
        step(walk.shape.paging.firstURL(configured), Progress(), completion)
    }

    private func subject(_ progress: Progress) -> String {
        walk.fetch.setting + (progress.pages.isEmpty ? "" : " page \(progress.pages.count + 1)")
    }

    private func failure(_ progress: Progress, _ url: String, _ reason: String, _ response: HTTPResponse? = nil) -> OriginFailure {
        OriginFailure(subject: "\(subject(progress)) \(url.cut(toBytes: 500))", url: url, attempts: response?.attempts ?? 1, reason: reason)
    }

    /// Asks for page `url` (after the pages in `progress`), unless the walk must end first.
    private func step(_ url: String, _ progress: Progress, _ completion: @escaping WalkCompletion) {
        let number = progress.pages.count + 1
        if let earlier = progress.fetched[url] {
            let why = walk.shape.paging == .link
                ? "the pages loop: page \(number - 1) links to \(url.cut(toBytes: 500)), which was already fetched"
                : "the pages loop: page \(number - 1) leads to \(url.cut(toBytes: 500)) again (page \(earlier)'s request): the \(walk.shape.paging.name) does not move on"
            completion(.failure(failure(progress, url, why))); return
        }
        guard Clock.elapsed(since: progress.started) <= timeout else {
            let seconds = NumberText.fixed(timeout.inSeconds, 1)
            completion(.failure(failure(progress, url, "the refresh took more than feed-timeout \(seconds) s; it had read \(progress.pages.count) page\(progress.pages.count == 1 ? "" : "s") and page \(number) would be \(url.cut(toBytes: 500))")))
            return
        }
        // One request past the bound is made: an empty page there is the
        // end of a feed of exactly `maxPages` pages (page and offset paging,
        // Mastodon's last `Link`), not one more (`received`).
        guard progress.pages.count <= walk.shape.maxPages else {
            completion(.failure(failure(progress, url, "more than \(walk.shape.setting("max-pages")) \(walk.shape.maxPages) pages; page \(number) would be \(url.cut(toBytes: 500))")))
            return
        }
        let stored = walk.stored.first { $0.url == url }
            ?? (progress.pages.isEmpty && !ignoreFirstStored ? walk.stored.first { $0.url.isEmpty } : nil)
        let asked = Asked(url: url, sent: walk.force ? Validators() : (stored?.validators.sanitized ?? Validators()), stored: stored)
        let request = FetchRequest(url: url, headers: FeedRefresher.conditionalHeaders(asked.sent) + [FeedContent.accept],
                                   maxBodySize: Int64(pageLimit), maxBodySetting: "feed-max-size")
        fetcher.fetchPage(request) { result in
            switch result {
            case .failure(let e): completion(.failure(OriginFailure(subject: "\(subject(progress)) \(url.cut(toBytes: 500))", e)))
            case .success(let (response, body)):
                do throws(OriginFailure) { try received(asked, response, body, progress, completion) } catch { completion(.failure(error)) }
            }
        }
    }

    /// One answer: the page it makes, then the next step or the end.
    private func received(_ asked: Asked, _ response: HTTPResponse, _ body: PageBody, _ before: Progress,
                          _ completion: @escaping WalkCompletion) throws(OriginFailure) {
        var progress = before
        let url = asked.url
        let (page, facts) = try pageResult(asked, response, body, progress)
        let number = progress.pages.count + 1
        if number > walk.shape.maxPages {
            let items = facts?.items ?? page.page.count
            if items > 0 || page.page.next != nil {
                let holds = items > 0 ? "holds \(NumberText.grouped(items)) item\(items == 1 ? "" : "s")" : "links to another"
                throw failure(before, url, "more than \(walk.shape.setting("max-pages")) \(walk.shape.maxPages) pages; page \(number) \(holds)", response)
            }
        }
        if let facts, walk.shape.paging != .link, facts.items > 0 {
            if facts.digest == progress.lastDigest {
                throw failure(progress, url, "page \(number) holds the same items as page \(number - 1): the origin does not move on by the \(walk.shape.paging.name) parameter (is it the one the API takes?)", response)
            }
        }
        progress.lastDigest = facts?.digest
        progress.largest = max(progress.largest, facts?.items ?? 0)
        progress.items += facts?.items ?? page.page.count
        if progress.items > walk.shape.maxItems {
            // A 304 page's stored items (a fresh page never passes: its decoding refuses it).
            throw failure(before, url, FeedDecoder.tooManyItems(walk.shape, room: walk.shape.maxItems - before.items).description, response)
        }
        progress.fetched[url] = number
        progress.pages.append(page)
        // The page's URL is kept twice (the loop check, the page's record): it
        // counts with the bodies against the walk's bound.
        progress.bytes += body.count + 2 * url.utf8.count
        if let stop = walk.stopAfter, stop(page) {
            completion(.success(WalkResult(pages: progress.pages, warning: .asBefore, stoppedEarly: true, bytes: progress.bytes))); return
        }
        guard let next = page.page.next else {
            let warning: WalkWarning = facts.map { f in f.hint.map { .more($0, page: number) } ?? .none } ?? .asBefore
            completion(.success(WalkResult(pages: progress.pages, warning: warning, bytes: progress.bytes))); return
        }
        let (product, overflow) = pageLimit.multipliedReportingOverflow(by: Self.maxFeedBodies)
        let bound = overflow ? Int.max : product
        guard progress.bytes <= bound else {
            throw failure(before, url, "the pages so far hold \(formatSize(Int64(progress.bytes))) of feed documents, more than \(Self.maxFeedBodies) times feed-max-size (\(formatSize(Int64(bound)))) in all")
        }
        step(next, progress, completion)
    }

    /// What one answer makes of a page: the stored page on a 304, else the
    /// decoded body with the next request its paging makes of it.
    private func pageResult(_ asked: Asked, _ response: HTTPResponse, _ body: PageBody,
                            _ progress: Progress) throws(OriginFailure) -> (PageResult<Decoded>, PageFacts?) {
        let url = asked.url
        if response.status == 304 {
            guard var page = asked.stored, asked.sent != Validators() else {
                throw failure(progress, url, "answered 304 Not Modified to a request that sent no validators", response)
            }
            page.url = url
            // The body is unchanged, but a Link header may name a page that
            // is new since (an oldest-first API whose last page filled up).
            if walk.shape.paging == .link, let link = response.headers["link"].flatMap(LinkHeader.next),
               let resolved = FeedDecoder.resolve(link, base: response.url) { page.next = resolved }
            return (.unchanged(page), nil)
        }
        var decoded: (Decoded, PageFacts)
        let step: NextStep
        do throws(FeedError) {
            decoded = try walk.decode(body, response.headers["content-type"], walk.shape.maxItems - progress.items)
            decoded.1.largestBefore = progress.largest
            step = try walk.shape.paging.next(after: decoded.1, url: url, linkHeader: response.headers["link"].flatMap(LinkHeader.next),
                                              headers: response.headers, shape: walk.shape)
        } catch { throw failure(progress, url, error.description, response) }
        var next: String?
        switch step {
        case .end:
            next = nil
            // A link walk (the default: no paging configured) that ended where
            // its headers count more pages: the page's number is its URL's
            // `page` (WordPress, GitLab), 1 without one.
            if decoded.1.hint == nil, walk.shape.paging == .link {
                let number = QueryParameters.value("page", in: url).flatMap { Int($0) } ?? 1
                decoded.1.hint = MoreHint.find(inHeaders: response.headers, page: number, prefix: walk.shape.prefix)
            }
        case .url(let u): next = u
        case .link(let written):
            // Resolved against the URL that answered (a redirect's).
            guard let resolved = FeedDecoder.resolve(written, base: response.url) else {
                throw failure(progress, url, "its next page's link \(written.cut()) is not an http or https URL", response)
            }
            next = resolved
        }
        if let n = next, n.utf8.count > Self.maxURLBytes {
            throw failure(progress, url, "its next page's URL is \(n.utf8.count) bytes, more than \(Self.maxURLBytes): \(n.cut())", response)
        }
        let validators = walk.validatorsToStore(asked.sent, response)
        return (.fresh(FeedPage(url: url, validators: validators, next: next, count: 0), decoded.0), decoded.1)
    }
}

import CacheProtocol

/// A listing (`list_posts`, `list_images`) read page by page, in requests of
/// a bounded size, so that a store of any size is listed in the memory of
/// one page: the requests to send and the checks on each answer. The one
/// implementation behind `CachedClient`'s `postPages` and `imagePages` and
/// cachectl's `get posts` and `get images` (docs/protocol.md, "Client
/// libraries"; the Python client's `iter_posts` does the same).
///
/// Nothing is handed out twice or skipped silently while the listing stays
/// as it was; when it changes between two pages (a refresh, a delete), the
/// walk ends with `CachedError` `.changed`:
///
/// - every answer must give the `total` the first gave;
/// - each request after the first starts one entry early, and that entry
///   must be the last one handed out (a post's id; a row's `url` and
///   `description`), so a listing that shifted under the walk (posts
///   dropped before the page, as many added after it, the total unchanged)
///   is seen too;
/// - a page with nothing new before the end is a listing that shrank.
///
/// A change these cannot see (an entry replaced by another before the page
/// being read, nothing after it moving) is not reported: a listing that is
/// being refreshed cannot be read atomically in pages.
///
/// A page refused because its answer would be longer than a client reads
/// (`bad_request` with `error.max_limit`, docs/protocol.md) is asked again
/// with the `limit` the daemon says fits.
package struct ListingWalk: Sendable {
    /// Which listing.
    package enum Kind: Sendable {
        case posts, images

        /// The operation that lists it.
        package var op: String { self == .posts ? "list_posts" : "list_images" }
        /// The answer's member holding the entries.
        package var member: String { self == .posts ? "posts" : "images" }
        /// What its entries are called in messages.
        package var noun: String { self == .posts ? "posts" : "rows" }
    }

    /// One request of the walk.
    package struct Request: Sendable {
        package var offset: Int
        package var limit: Int
        /// It starts one entry early, at the last one handed out.
        package var overlaps: Bool

        /// The request's `offset` and `limit` members.
        package var fields: [(String, JSON)] {
            [("offset", .number(String(offset))), ("limit", .number(String(limit)))]
        }
    }

    /// The entries of one answer that are new to the walk, in list order.
    package struct Page: Sendable {
        /// The position in the listing of the first of `entries`.
        package var offset: Int
        /// The listing's total, the same in every page.
        package var total: Int
        /// The posts (`list_posts`) or rows (`list_images`).
        package var entries: [JSON]
        /// Each post's id, the one it is kept by (`list_posts`' `ids`); nil
        /// from a daemon that gives none, and for rows.
        package var ids: [JSON]?
        /// The answer, its `ids` and entries cut to these: what cachectl
        /// prints with `--json`.
        package var answer: JSON
    }

    /// The entries of a page unless told otherwise (cachectl's, and the
    /// libraries' default): with the one each request after the first
    /// repeats, 1,000 a request, the most the daemon answers at once from
    /// memory on its event loop (`CacheService.inlineListLimit`); a longer
    /// page waits for a worker. A page of posts of 1 KB is a line of 1 MB.
    package static let defaultPageSize = 999

    package let kind: Kind
    /// The most new entries in one page (at least 1).
    package let pageSize: Int
    /// Where the walk starts, and how many entries it reads at most (nil: to the end).
    package let start: Int
    package let count: Int?
    /// Entries handed out so far.
    package private(set) var read = 0
    /// The listing's total, from the first answer.
    package private(set) var total: Int?
    /// What identifies the last entry handed out.
    private var lastKey: JSON?
    /// The request sent and not yet answered.
    private var pending: Request?
    /// The limit of the next request, after a refusal said what fits.
    private var shrunk: Int?
    /// Whether the next request starts one entry early (not after a refusal
    /// said that only that entry fits).
    private var overlapping = true

    /// A walk of `kind` from `offset`, at most `count` entries (nil: to the
    /// end), `pageSize` new entries a page.
    package init(_ kind: Kind, pageSize: Int, offset: Int = 0, count: Int? = nil) {
        self.kind = kind
        self.pageSize = max(1, pageSize)
        start = max(0, offset)
        self.count = count.map { max(0, $0) }
    }

    /// The position after the last entry the walk reads; nil before the first answer.
    package var end: Int? {
        total.map { t in count.map { min(t, start + $0) } ?? t }
    }

    /// Whether the walk has read every entry it was to.
    package var isDone: Bool {
        guard let end else { return false }
        return start + read >= end
    }

    /// The next request to send; nil once the walk is over. The first
    /// request is always sent (it gives the total).
    package mutating func nextRequest() -> Request? {
        guard !isDone else { return nil }
        let position = start + read
        let left = end.map { $0 - position } ?? count.map { $0 - read } ?? pageSize
        var request = Request(offset: position, limit: min(pageSize, left), overlaps: false)
        if read > 0 && overlapping {
            request = Request(offset: position - 1, limit: request.limit + 1, overlaps: true)
        }
        if let shrunk { request.limit = min(request.limit, shrunk) }
        pending = request
        return request
    }

    /// Takes the answer to the request sent: an error answer that refused
    /// the page as too long is asked again smaller (returns nil: send
    /// `nextRequest()` again); any other error answer is thrown; an ok one
    /// gives its new entries, checked against the pages before.
    package mutating func take(_ answer: JSON) throws(CachedError) -> Page? {
        guard let asked = pending else { throw CachedError(.malformed, "a \(kind.op) answer that was not asked for") }
        pending = nil
        if let error = CachedError(answer: answer) {
            if shrinks(asked, answer) { return nil }
            throw error
        }
        guard let t = answer["total"]?.integer, t >= 0, let all = answer[kind.member]?.array else {
            throw CachedError(.malformed, "a \(kind.op) answer without total and \(kind.member): \(Self.quote(answer))")
        }
        let allIDs = kind == .posts ? answer["ids"]?.array : nil
        if let allIDs, allIDs.count != all.count {
            throw CachedError(.malformed, "a \(kind.op) answer with \(allIDs.count) ids for \(all.count) posts")
        }
        guard all.count <= asked.limit else {
            throw CachedError(.malformed, "a \(kind.op) answer of \(all.count) \(kind.noun) when \(asked.limit) were asked for")
        }
        if let total, total != Int(t) {
            throw changed("\(total) at first, \(t) now")
        }
        total = Int(t)
        var skip = 0
        if asked.overlaps {
            guard let first = all.first, key(first, allIDs?.first) == lastKey else {
                throw changed("the last of the \(kind.noun) read is no longer at position \(asked.offset)")
            }
            skip = 1
        }
        let entries = Array(all.dropFirst(skip))
        let ids = allIDs.map { Array($0.dropFirst(skip)) }
        let position = start + read
        if entries.isEmpty, let end, position < end {
            throw changed("the listing ended at position \(position), before \(end)")
        }
        read += entries.count
        if let last = entries.last { lastKey = key(last, ids?.last) }
        shrunk = nil
        overlapping = true
        return Page(offset: position, total: Int(t), entries: entries, ids: ids, answer: skip == 0 ? answer : Self.cut(answer, kind, entries, ids))
    }

    /// After a page refused as too long for a line (`bad_request` with
    /// `max_limit`): whether a smaller request is to be sent. One whose
    /// overlap alone fits asks for the next entry alone, unchecked.
    private mutating func shrinks(_ asked: Request, _ answer: JSON) -> Bool {
        guard answer["error"]?["code"]?.string == ErrorCode.badRequest.rawValue,
              let fit = answer["error"]?["max_limit"]?.integer.map(Int.init), fit >= 0, fit < asked.limit else { return false }
        if asked.overlaps && fit < 2 {
            overlapping = false
            shrunk = 1
            return true
        }
        guard fit >= 1 else { return false }
        shrunk = fit
        return true
    }

    /// What identifies an entry across pages: a post's id, a row's URL and description.
    private func key(_ entry: JSON, _ id: JSON?) -> JSON {
        switch kind {
        case .posts: id ?? entry["id"] ?? .null
        case .images: .array([entry["url"] ?? .null, entry["description"] ?? .null])
        }
    }

    private func changed(_ how: String) -> CachedError {
        CachedError(.changed, "the \(kind.noun) changed while they were read page by page (a refresh or a delete in between): "
                    + "\(how); \(read) of them were read")
    }

    /// `answer` with its entries (and ids) replaced by `entries` (and `ids`).
    private static func cut(_ answer: JSON, _ kind: Kind, _ entries: [JSON], _ ids: [JSON]?) -> JSON {
        guard case .object(let members) = answer else { return answer }
        return .object(members.map { name, value in
            if name == kind.member { return (name, .array(entries)) }
            if name == "ids", let ids { return (name, .array(ids)) }
            return (name, value)
        })
    }

    private static func quote(_ answer: JSON) -> String {
        String(decoding: answer.encoded.prefix(200), as: UTF8.self)
    }
}

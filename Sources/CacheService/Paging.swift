import CacheProtocol
import CacheSystem

/// How a feed names its next page (`posts-paging`, `images-paging`;
/// docs/protocol.md, "Paging"): each kind reads what it needs from a page
/// (`PageFacts`) and makes the next request from the request before it.
public enum Paging: Sendable, Equatable {
    /// A next URL: `posts-next`, a JSON Feed's `next_url`, an RSS or Atom
    /// `<link rel="next">`, else a `Link` header's `rel="next"`.
    case link
    /// A value handed back as a query parameter.
    case cursor(CursorPaging)
    /// `offset` and `limit` parameters.
    case offset(OffsetPaging)
    /// A page number parameter.
    case page(PageNumberPaging)

    /// The kind and its settings as one line, in a form fixed here (not
    /// Swift's reflection, which a rename would change): `link`;
    /// `cursor pointer:/data/after after -`, `cursor header:x-next cursor
    /// /has_more`, `cursor last:/id starting_after /has_more`; `offset skip
    /// limit 100 /total`; `page page 0 /nbPages` (`-` for one unset).
    /// What `feeds.state`'s digest is made of (docs/storage-format.md).
    public var canonical: String {
        func p(_ x: (some CustomStringConvertible)?) -> String { x?.description ?? "-" }
        switch self {
        case .link: return "link"
        case .cursor(let c):
            let source = switch c.source {
            case .pointer(let x): "pointer:\(x)"
            case .header(let h): "header:\(h)"
            case .lastItem(let x): "last:\(x)"
            }
            return "cursor \(source) \(c.parameter) \(p(c.hasMore))"
        case .offset(let o): return "offset \(o.offsetParameter) \(o.limitParameter) \(o.pageSize.map(String.init) ?? "-") \(p(o.total))"
        case .page(let g): return "page \(g.parameter) \(g.start) \(p(g.totalPages))"
        }
    }

    /// The setting's value: `link`, `cursor`, `offset` or `page`.
    public var name: String {
        switch self {
        case .link: "link"
        case .cursor: "cursor"
        case .offset: "offset"
        case .page: "page"
        }
    }
}

/// Where a cursor is read.
public enum CursorSource: Sendable, Equatable {
    /// A JSON Pointer into the page (`posts-cursor = /data/after`).
    case pointer(JSONPointer)
    /// A response header (`posts-cursor = header:X-Next-Cursor`), its name lowercased.
    case header(String)
    /// A member of the page's last item, after `posts-item` (`posts-cursor-last = /id`: Stripe).
    case lastItem(JSONPointer)
}

/// Where a count is read (`posts-total`, `posts-total-pages`): a member of
/// the page, or a response header (WordPress `X-WP-TotalPages`, json-server
/// `X-Total-Count`, GitLab `X-Total-Pages`).
public enum CountSource: Sendable, Equatable, CustomStringConvertible {
    /// A JSON Pointer into the page (`posts-total = /total`).
    case pointer(JSONPointer)
    /// A response header (`posts-total-pages = header:X-WP-TotalPages`), its name lowercased.
    case header(String)

    /// As the setting is written: the pointer, or `header:NAME`
    /// (`feeds.state`'s digest is made of it: a pointer reads as it always did).
    public var description: String {
        switch self {
        case .pointer(let p): p.description
        case .header(let h): "header:\(h)"
        }
    }
}

/// `posts-paging = cursor`.
public struct CursorPaging: Sendable, Equatable {
    public var source: CursorSource
    /// The query parameter that carries the cursor (`posts-cursor-param`).
    public var parameter: String
    /// A boolean that ends the walk when false (`posts-has-more`, Stripe's `/has_more`).
    public var hasMore: JSONPointer?

    public init(source: CursorSource, parameter: String = "cursor", hasMore: JSONPointer? = nil) {
        self.source = source
        self.parameter = parameter
        self.hasMore = hasMore
    }
}

/// `posts-paging = offset`.
public struct OffsetPaging: Sendable, Equatable {
    public var offsetParameter: String
    public var limitParameter: String
    /// Items asked per page (`posts-page-size`); nil: a limit already in the URL, if any.
    public var pageSize: Int?
    /// The total count of items in each page (`posts-total`), if the API gives it.
    public var total: CountSource?

    public init(offsetParameter: String = "offset", limitParameter: String = "limit", pageSize: Int? = nil, total: CountSource? = nil) {
        self.offsetParameter = offsetParameter
        self.limitParameter = limitParameter
        self.pageSize = pageSize
        self.total = total
    }
}

/// `posts-paging = page`.
public struct PageNumberPaging: Sendable, Equatable {
    public var parameter: String
    /// The first page's number (`posts-page-start`): 1, or 0 (Algolia).
    public var start: Int
    /// The page count in each page (`posts-total-pages`, Algolia's
    /// `/nbPages`, WordPress's `header:X-WP-TotalPages`), if the API gives it.
    public var totalPages: CountSource?

    public init(parameter: String = "page", start: Int = 1, totalPages: CountSource? = nil) {
        self.parameter = parameter
        self.start = start
        self.totalPages = totalPages
    }
}

/// What paging reads from one decoded page.
public struct PageFacts: Sendable, Equatable {
    /// Items in the page (before ids are checked).
    public var items = 0
    /// The next page's URL as the document names it (`posts-next`, `next_url`,
    /// `<link rel="next">`), unresolved.
    public var documentNext: String?
    /// The value at `posts-cursor` (or of `posts-cursor-last` in the last item); nil: none.
    public var cursor: JSON?
    /// The value at `posts-has-more`; nil: none.
    public var hasMore: JSON?
    /// The value at `posts-total` or `posts-total-pages` when it is a
    /// pointer (a header is read by `CountSource.count`); nil: none.
    public var total: JSON?
    /// A sign of more pages that the settings do not follow (`MoreHint`).
    public var hint: MoreHint?
    /// A digest of the items' text: a page equal to the one before it
    /// means the origin ignored the parameter that should have moved on.
    public var digest = 0
    /// The most items any earlier page of this walk held (set by the walk):
    /// an offset walk's page size when the origin caps the limit asked.
    public var largestBefore = 0

    public init() {}
}

/// The request after a page, or the end of the feed.
public enum NextStep: Equatable, Sendable {
    case end
    /// A URL as the page wrote it: resolved against the page's URL.
    case link(String)
    /// A URL built from the request before it: absolute already.
    case url(String)
}

extension Paging {
    /// The first request's URL: the configured one with the paging's
    /// parameters set (`offset=0`, `limit=SIZE`, `page=START`).
    func firstURL(_ configured: String) -> String {
        switch self {
        case .link, .cursor: return configured
        case .offset(let o):
            var url = QueryParameters.setting(o.offsetParameter, to: "0", in: configured)
            if let size = o.pageSize { url = QueryParameters.setting(o.limitParameter, to: String(size), in: url) }
            return url
        case .page(let p): return QueryParameters.setting(p.parameter, to: String(p.start), in: configured)
        }
    }

    /// The request after the page at `url` whose facts and headers are
    /// these; `shape` names the settings in errors.
    public func next(after facts: PageFacts, url: String, linkHeader: String?, headers: [String: String], shape: FeedShape) throws(FeedError) -> NextStep {
        switch self {
        case .link:
            if let n = facts.documentNext ?? linkHeader { return .link(n) }
            return .end
        case .cursor(let c): return try c.next(facts, url: url, headers: headers, shape: shape)
        case .offset(let o): return try o.next(facts, url: url, headers: headers, shape: shape)
        case .page(let p): return try p.next(facts, url: url, headers: headers, shape: shape)
        }
    }
}

extension CursorPaging {
    /// The longest cursor sent back: real APIs' are tens to hundreds of
    /// bytes; a larger one is a hostile or broken page, refused.
    static let maxCursorBytes = 4096

    func next(_ facts: PageFacts, url: String, headers: [String: String], shape: FeedShape) throws(FeedError) -> NextStep {
        var saysMore = false
        if let pointer = hasMore, let value = facts.hasMore, !value.isNull {
            guard let more = value.bool else {
                throw FeedError("\(shape.setting("has-more")) \(pointer) is \(value.kindName), not a boolean")
            }
            if !more { return .end }
            saysMore = true
        }
        let value: JSON?
        let named: String
        switch source {
        case .pointer(let p): value = facts.cursor; named = "\(shape.setting("cursor")) \(p)"
        case .lastItem(let p): value = facts.cursor; named = "\(shape.setting("cursor-last")) \(p) of the last item"
        case .header(let h): value = headers[h].map { .string($0) }; named = "\(shape.setting("cursor")) header:\(h)"
        }
        let cursor: String
        switch value {
        case nil, .null?: cursor = ""
        case .string(let s)?: cursor = s
        case .number(let n)?: cursor = n
        case let other?: throw FeedError("\(named) is \(other.kindName), not a string or a number")
        }
        // The page says there is more but gives no way to it: a wrong
        // pointer or a changed API, never a silent end.
        if cursor.isEmpty, saysMore, let pointer = hasMore {
            throw FeedError("\(shape.setting("has-more")) \(pointer) is true but \(named) gives no cursor")
        }
        // An empty page with a cursor goes on (Slack may send fewer items
        // than asked, none at all, with more to come); one without ends.
        if cursor.isEmpty { return .end }
        guard cursor.utf8.count <= Self.maxCursorBytes else {
            throw FeedError("\(named) is a cursor of \(cursor.utf8.count) bytes, more than \(Self.maxCursorBytes)")
        }
        return .url(QueryParameters.setting(parameter, to: cursor, in: url))
    }
}

extension CountSource {
    /// The count the page at hand gives, nil when it gives none (a missing
    /// or `null` member, a missing or empty header); anything but a whole
    /// number from 0 fails the refresh, naming `setting`.
    func count(_ facts: PageFacts, headers: [String: String], setting: String) throws(FeedError) -> Int64? {
        let count: Int64
        switch self {
        case .pointer(let p):
            guard let value = facts.total, !value.isNull else { return nil }
            guard let n = value.integer else {
                // A whole number past Int64 is named as such, not as "not a whole number".
                if case .number(let text) = value, text.utf8.allSatisfy({ ASCII.isDigit($0) || $0 == UInt8(ascii: "-") }) {
                    throw FeedError("\(setting) \(p) is \(text.cut(toBytes: 40))" + (text.hasPrefix("-") ? ": a count is never negative" : ", more than 2^63 - 1"))
                }
                throw FeedError("\(setting) \(p) is \(value.kindName), not a whole number")
            }
            count = n
        case .header(let h):
            guard let text = headers[h]?.trimmed(), !text.isEmpty else { return nil }
            guard let n = Int64(text) else {
                let digits = text.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
                throw FeedError("\(setting) \(self) is \(MoreHint.quoted(.string(text))), " + (digits ? "more than 2^63 - 1" : "not a whole number"))
            }
            count = n
        }
        guard count >= 0 else { throw FeedError("\(setting) \(self) is \(count): a count is never negative") }
        return count
    }
}

extension OffsetPaging {
    func next(_ facts: PageFacts, url: String, headers: [String: String], shape: FeedShape) throws(FeedError) -> NextStep {
        guard facts.items > 0 else { return .end }
        let offset = QueryParameters.value(offsetParameter, in: url).flatMap { Int($0) } ?? 0
        let next = offset + facts.items
        if let count = try total?.count(facts, headers: headers, setting: shape.setting("total")) {
            if next >= count { return .end }
        } else if facts.largestBefore > 0, facts.items < facts.largestBefore {
            // Shorter than a page before it: the last. A first page shorter
            // than asked is not taken for the last (an origin may cap the
            // limit below what was asked, silently): the next page tells.
            return .end
        }
        return .url(QueryParameters.setting(offsetParameter, to: String(next), in: url))
    }
}

extension PageNumberPaging {
    func next(_ facts: PageFacts, url: String, headers: [String: String], shape: FeedShape) throws(FeedError) -> NextStep {
        guard facts.items > 0 else { return .end }
        let current = QueryParameters.value(parameter, in: url).flatMap { Int($0) } ?? start
        if let count = try totalPages?.count(facts, headers: headers, setting: shape.setting("total-pages")) {
            if Int64(current - start + 1) >= count { return .end }
        }
        return .url(QueryParameters.setting(parameter, to: String(current + 1), in: url))
    }
}

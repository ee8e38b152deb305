import CacheProtocol
import CacheService

/// One feed's paging settings as written (`posts-paging`, `posts-cursor`,
/// ...; docs/operations.md, "Paging"): nil where unset, so the image
/// manifest can take the posts' values when it is the same feed.
public struct FeedPagingSettings: Sendable, Equatable {
    public var kind: String?
    public var cursor: String?
    public var cursorParam: String?
    public var cursorLast: JSONPointer?
    public var hasMore: JSONPointer?
    public var offsetParam: String?
    public var limitParam: String?
    public var pageSize: Int?
    public var total: CountSource?
    public var pageParam: String?
    public var pageStart: Int?
    public var totalPages: CountSource?
    /// The post (or row) inside each item (`posts-item`).
    public var item: JSONPointer?

    public init() {}

    /// Each value of `self`, else of `other`: the manifest's settings
    /// over the posts' when both feeds are one URL.
    func over(_ other: FeedPagingSettings) -> FeedPagingSettings {
        var s = self
        s.kind = kind ?? other.kind
        s.cursor = cursor ?? other.cursor
        s.cursorParam = cursorParam ?? other.cursorParam
        s.cursorLast = cursorLast ?? other.cursorLast
        s.hasMore = hasMore ?? other.hasMore
        s.offsetParam = offsetParam ?? other.offsetParam
        s.limitParam = limitParam ?? other.limitParam
        s.pageSize = pageSize ?? other.pageSize
        s.total = total ?? other.total
        s.pageParam = pageParam ?? other.pageParam
        s.pageStart = pageStart ?? other.pageStart
        s.totalPages = totalPages ?? other.totalPages
        s.item = item ?? other.item
        return s
    }

    /// The settings of each paging kind, by their names' suffix.
    static let kindOf: [(suffix: String, kind: String, isSet: @Sendable (FeedPagingSettings) -> Bool)] = [
        ("cursor", "cursor", { $0.cursor != nil }), ("cursor-param", "cursor", { $0.cursorParam != nil }),
        ("cursor-last", "cursor", { $0.cursorLast != nil }), ("has-more", "cursor", { $0.hasMore != nil }),
        ("offset-param", "offset", { $0.offsetParam != nil }), ("limit-param", "offset", { $0.limitParam != nil }),
        ("page-size", "offset", { $0.pageSize != nil }), ("total", "offset", { $0.total != nil }),
        ("page-param", "page", { $0.pageParam != nil }), ("page-start", "page", { $0.pageStart != nil }),
        ("total-pages", "page", { $0.totalPages != nil }),
    ]

    /// Refuses a setting of another paging kind than `kind`: a feed set up
    /// for a cursor but left on `link` would read its first page alone.
    func checkKind(_ kind: String, _ prefix: String) throws(SettingsError) {
        for s in Self.kindOf where s.kind != kind && s.isSet(self) {
            throw SettingsError("\(prefix)-\(s.suffix) is set but \(prefix)-paging is \(kind): set \(prefix)-paging = \(s.kind), or remove \(prefix)-\(s.suffix)")
        }
    }

    /// The paging these settings describe; `prefix` names them in errors.
    func paging(_ prefix: String) throws(SettingsError) -> Paging {
        switch kind ?? "link" {
        case "link": return .link
        case "cursor":
            let source: CursorSource
            switch (cursor, cursorLast) {
            case (let c?, nil): source = try Self.cursorSource(prefix, c)
            case (nil, let last?): source = .lastItem(last)
            case (nil, nil): throw SettingsError("\(prefix)-paging = cursor needs \(prefix)-cursor (a JSON Pointer or header:NAME) or \(prefix)-cursor-last")
            case (_?, _?): throw SettingsError("set one of \(prefix)-cursor and \(prefix)-cursor-last, not both")
            }
            return .cursor(CursorPaging(source: source, parameter: cursorParam ?? "cursor", hasMore: hasMore))
        case "offset":
            return .offset(OffsetPaging(offsetParameter: offsetParam ?? "offset", limitParameter: limitParam ?? "limit", pageSize: pageSize, total: total))
        case "page":
            return .page(PageNumberPaging(parameter: pageParam ?? "page", start: pageStart ?? 1, totalPages: totalPages))
        case let other:
            throw SettingsError("\(prefix)-paging must be link, cursor, offset or page, not \"\(other)\"")
        }
    }

    private static func cursorSource(_ prefix: String, _ text: String) throws(SettingsError) -> CursorSource {
        if let name = try headerName("\(prefix)-cursor", text) { return .header(name) }
        guard let p = try ValueParser.pointer("\(prefix)-cursor", text, emptyIsNone: false) else {
            throw SettingsError("\(prefix)-cursor must be a JSON Pointer or header:NAME")
        }
        return .pointer(p)
    }
}

extension FeedPagingSettings {
    /// The header named by `header:NAME`, lowercased; nil when `text` is not
    /// of that form.
    static func headerName(_ setting: String, _ text: String) throws(SettingsError) -> String? {
        guard text.lowercased().hasPrefix("header:") else { return nil }
        let name = String(text.dropFirst("header:".count)).trimmed()
        guard !name.isEmpty, name.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: ":") }) else {
            throw SettingsError("\(setting) header:NAME needs a header name, not \"\(text)\"")
        }
        return name.lowercased()
    }

    /// `posts-total` or `posts-total-pages`: a JSON Pointer, or
    /// `header:NAME`; empty: none.
    static func countSource(_ setting: String, _ text: String) throws(SettingsError) -> CountSource? {
        if let name = try headerName(setting, text) { return .header(name) }
        return try ValueParser.pointer(setting, text, emptyIsNone: true).map(CountSource.pointer)
    }
}

extension Settings {
    /// The image manifest's paging settings: its own, over the posts' when
    /// `images-url` is `posts-url` (one feed serving both).
    var effectiveImagesPaging: FeedPagingSettings {
        guard let p = postsURL, p == imagesURL else { return imagesPaging }
        return imagesPaging.over(postsPaging)
    }

    /// Checks that each feed's paging settings make a paging (called once
    /// every source of settings has had its say).
    func checkPaging() throws(SettingsError) {
        _ = try postsPaging.paging("posts")
        try postsPaging.checkKind(postsPaging.kind ?? "link", "posts")
        let images = effectiveImagesPaging
        _ = try images.paging("images")
        // The manifest's own settings; what it takes from the posts' was checked above.
        try imagesPaging.checkKind(images.kind ?? "link", "images")
    }

    /// Which feed a paging setting belongs to.
    enum PagingFeed: Sendable {
        case posts, images
        var prefix: String { self == .posts ? "posts" : "images" }
    }

    /// One feed's paging settings.
    subscript(paging feed: PagingFeed) -> FeedPagingSettings {
        get { feed == .posts ? postsPaging : imagesPaging }
        set { if feed == .posts { postsPaging = newValue } else { imagesPaging = newValue } }
    }

    /// A paging setting of `feed` stored at `field`.
    private static func spec<V: Sendable>(_ feed: PagingFeed, _ suffix: String, _ value: String, _ doc: String,
                                          _ field: WritableKeyPath<FeedPagingSettings, V> & Sendable,
                                          parse: @escaping @Sendable (String, String) throws(SettingsError) -> V,
                                          format: @escaping @Sendable (V) -> String) -> SettingSpec {
        let name = "\(feed.prefix)-\(suffix)"
        return SettingSpec(name: name, value: value, doc: doc, reload: .live,
                           set: { (s: inout Settings, text: String) throws(SettingsError) in s[paging: feed][keyPath: field] = try parse(name, text) },
                           show: { format($0[paging: feed][keyPath: field]) },
                           copy: { $0[paging: feed][keyPath: field] = $1[paging: feed][keyPath: field] })
    }

    /// The settings of one feed's paging, named `PREFIX-...`.
    static func pagingTable(_ feed: PagingFeed) -> [SettingSpec] {
        let name: @Sendable (String?) -> String = { $0 ?? "-" }
        let pointer: @Sendable (JSONPointer?) -> String = { $0?.description ?? "-" }
        let number: @Sendable (Int?) -> String = { $0.map(String.init) ?? "-" }
        let count: @Sendable (CountSource?) -> String = { $0?.description ?? "-" }
        let param: @Sendable (String, String) throws(SettingsError) -> String? = { k, v throws(SettingsError) in
            guard !v.isEmpty else { return nil }
            guard v.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !"&=#%+".utf8.contains($0) }) else {
                throw SettingsError("\(k) must be a query parameter name as the API documents it (no spaces, &, =, #, % or +), not \"\(v)\"")
            }
            return v
        }
        let ptr: @Sendable (String, String) throws(SettingsError) -> JSONPointer? = { k, v throws(SettingsError) in
            try ValueParser.pointer(k, v, emptyIsNone: true)
        }
        let kind: @Sendable (String, String) throws(SettingsError) -> String? = { k, v throws(SettingsError) in
            guard !v.isEmpty else { return nil }
            guard ["link", "cursor", "offset", "page"].contains(v) else { throw SettingsError("\(k) must be link, cursor, offset or page, not \"\(v)\"") }
            return v
        }
        let what = feed == .posts ? "posts" : "the image manifest"
        return [
            spec(feed, "paging", "KIND", "how the next page of \(what) is named: link (a next URL), cursor, offset or page", \.kind,
                 parse: kind, format: { $0 ?? "link" }),
            spec(feed, "cursor", "POINTER", "paging = cursor: JSON Pointer to the next cursor in each page, or header:NAME", \.cursor,
                 parse: { _, v in v.isEmpty ? nil : v }, format: name),
            spec(feed, "cursor-param", "NAME", "paging = cursor: the query parameter that carries the cursor (default cursor)", \.cursorParam,
                 parse: param, format: name),
            spec(feed, "cursor-last", "POINTER", "paging = cursor: the cursor is this member of each page's last item (Stripe: /id)", \.cursorLast,
                 parse: ptr, format: pointer),
            spec(feed, "has-more", "POINTER", "paging = cursor: JSON Pointer to a boolean that ends the walk when false", \.hasMore,
                 parse: ptr, format: pointer),
            spec(feed, "offset-param", "NAME", "paging = offset: the offset's query parameter (default offset)", \.offsetParam,
                 parse: param, format: name),
            spec(feed, "limit-param", "NAME", "paging = offset: the page size's query parameter (default limit)", \.limitParam,
                 parse: param, format: name),
            spec(feed, "page-size", "N", "paging = offset: items asked per page, 1 to 100000 (default: a limit in the URL)", \.pageSize,
                 parse: { k, v throws(SettingsError) in v.isEmpty ? nil : try ValueParser.whole(k, v, 1...100_000) }, format: number),
            spec(feed, "total", "POINTER", "paging = offset: JSON Pointer to the total count of items, or header:NAME (X-Total-Count)", \.total,
                 parse: FeedPagingSettings.countSource, format: count),
            spec(feed, "page-param", "NAME", "paging = page: the page number's query parameter (default page)", \.pageParam,
                 parse: param, format: name),
            spec(feed, "page-start", "N", "paging = page: the first page's number, 0 or 1 (default 1)", \.pageStart,
                 parse: { k, v throws(SettingsError) in v.isEmpty ? nil : try ValueParser.whole(k, v, 0...1) }, format: number),
            spec(feed, "total-pages", "POINTER", "paging = page: JSON Pointer to the number of pages, or header:NAME (X-WP-TotalPages)", \.totalPages,
                 parse: FeedPagingSettings.countSource, format: count),
            spec(feed, "item", "POINTER", "JSON Pointer inside each item to the object that is the \(feed == .posts ? "post" : "image row") (Reddit: /data)", \.item,
                 parse: ptr, format: pointer),
        ]
    }
}

import CacheProtocol
import CacheSystem

/// Why a page of a feed could not be read; the refresh fails with it and
/// changes nothing.
public struct FeedError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }

    /// A page's reading given up because the daemon is stopping (`StopFlag.current`).
    public static let stopping = FeedError("the page was not read to its end: the daemon is stopping")

    /// How many decoded items (JSON values written out, each a post)
    /// pass between two looks at the stop flag, unless its bytes come first.
    static let postsBetweenLooks = 16
}

/// A loop's looks at the parse's stop flag (`StopFlag.current`): every
/// `items` items or `StopFlag.bytesBetweenLooks` bytes, whichever comes
/// first; `step` throws `FeedError.stopping` once the flag is up.
struct StopLooks {
    let items: Int
    private var itemsSince = 0
    private var bytesSince = 0

    init(every items: Int = StopFlag.itemsBetweenLooks) { self.items = items }

    /// Counts one item of `bytes` bytes, and looks when it is time.
    mutating func step(bytes: Int) throws(FeedError) {
        itemsSince += 1
        bytesSince += bytes
        guard itemsSince >= items || bytesSince >= StopFlag.bytesBetweenLooks else { return }
        itemsSince = 0
        bytesSince = 0
        if StopFlag.current?.isRaised == true { throw FeedError.stopping }
    }
}

/// One page's posts, decoded by the rules of docs/protocol.md, "Feeds".
public struct DecodedPostsPage: Sendable {
    /// Valid posts in page order: id and the element's JSON text (whitespace
    /// removed). Not deduplicated: a refresh drops repeated ids across all pages.
    public var posts: [(id: PostID, json: [UInt8])] { batch.withLock { $0 } }
    /// The posts, shared by every copy of this page until the refresh that
    /// stores them takes them (`takePosts`): then the walk's pages hold no
    /// post, and each post's bytes are freed as the post table takes them in
    /// (a million posts are not held twice: issue 34).
    private let batch: Locked<[(id: PostID, json: [UInt8])]>
    /// Elements skipped: not an object, without a valid id, or too large.
    public var invalid: Int
    /// Of `invalid`, the elements that are no post at all (not an object,
    /// or without a valid id), and the first one's fault: a refresh whose
    /// fresh pages give no post but some of these fails (`storePosts`).
    public var notPosts = 0
    public var firstNotPost: String?
    /// One line per skipped element, for the log.
    public var problems: [String]
    /// What paging reads from the page (its next URL, cursor, counts).
    public var facts: PageFacts
    /// The next page's URL as the document names it (`posts-next`, a JSON
    /// Feed's `next_url`, `<link rel="next">`), unresolved; nil when it names none.
    public var next: String? { facts.documentNext }

    public init(posts: [(id: PostID, json: [UInt8])], invalid: Int, problems: [String], facts: PageFacts) {
        batch = Locked(posts)
        self.invalid = invalid
        self.problems = problems
        self.facts = facts
    }

    /// How many posts the page holds (none once taken).
    public var count: Int { batch.withLock { $0.count } }

    /// The posts, moved out: every copy of this page holds none after this.
    func takePosts() -> [(id: PostID, json: [UInt8])] { batch.withLock { p in defer { p = [] }; return p } }
}

/// One row of the image manifest.
public struct ManifestEntry: Sendable, Equatable {
    /// The URL as written (possibly relative); empty when the element had none.
    public var url: String
    public var description: String?
}

/// One page of the image manifest.
public struct DecodedManifestPage: Sendable {
    public var entries: [ManifestEntry]
    /// As `DecodedPostsPage.facts`.
    public var facts: PageFacts
    /// As `DecodedPostsPage.next`.
    public var next: String? { facts.documentNext }
}

/// Decoders for the two feeds. They keep what the origin sent: a post is
/// stored as the exact text of its array element (minus insignificant
/// whitespace, so it fits on one protocol line), unknown fields included.
public enum FeedDecoder {
    /// The version URL prefix that makes an object a JSON Feed (1.0, 1.1).
    static let jsonFeedVersionPrefix = "https://jsonfeed.org/version/"

    /// One item of a page: the post or row (after `posts-item`), and where
    /// its text is in the body when it is the array element itself (else
    /// it is written from the value). `value` is nil when `posts-item`
    /// names no object in the element.
    struct Item {
        var value: JSON?
        var range: Range<Int>?
    }

    /// A page's items and what paging reads from it. A JSON page's items
    /// are ranges of its body, each parsed only when it is read (`item`,
    /// `forEachItem`): a page of a million posts is never a tree of a
    /// million values (issue 34).
    struct Document {
        /// The items already built (an RSS or Atom page's entries), else nil.
        var values: [JSON]?
        /// Where each JSON item's element lies in the body.
        var ranges: [Range<Int>] = []
        /// The tokens of the array the ranges lie in (for the nesting left to an element).
        var path: [String] = []
        /// `posts-item`: where in each element the item lies, if not the element itself.
        var itemPointer: JSONPointer?
        var facts: PageFacts

        var count: Int { values?.count ?? ranges.count }

        /// Item `index`, its element parsed from `body` (checked already by
        /// the document's parse, so it cannot fail; nil if it did).
        func item(_ index: Int, in body: [UInt8]) -> Item {
            if let values { return Item(value: values[index], range: nil) }
            let range = ranges[index]
            let value = try? JSONParser.parseElement(body[range], capturedAt: path)
            guard let itemPointer else { return Item(value: value, range: range) }
            return Item(value: value.flatMap { itemPointer.resolve(in: $0) }.flatMap { $0.isObject ? $0 : nil }, range: nil)
        }

        /// What `pointer` names in the page whose root is `root`: a pointer
        /// into the items' array (`/items/0/id`) reads the element it names
        /// from the body, since the root holds that array empty.
        func resolve(_ pointer: JSONPointer, root: JSON, in body: [UInt8]) -> JSON? {
            let tokens = pointer.tokens
            guard values == nil, tokens.count > path.count, tokens.starts(with: path),
                  let index = JSONPointer.index(tokens[path.count]), index < ranges.count else {
                return pointer.resolve(in: root)
            }
            guard let element = try? JSONParser.parseElement(body[ranges[index]], capturedAt: path) else { return nil }
            return JSONPointer.resolve(Array(tokens[(path.count + 1)...]), in: element)
        }

        /// Calls `body` with each item in page order, one parsed at a time,
        /// giving up (`FeedError.stopping`) once the daemon stops (`StopLooks`).
        func forEachItem(in page: [UInt8], _ body: (Int, Item) -> Void) throws(FeedError) {
            var looks = StopLooks(every: values == nil ? StopFlag.itemsBetweenLooks : FeedError.postsBetweenLooks)
            for index in 0..<count {
                try looks.step(bytes: values == nil ? ranges[index].count : 0)
                body(index, item(index, in: page))
            }
        }
    }

    /// Finds the items of one page: an RSS or Atom document's entries as
    /// JSON Feed items, else the array at `posts-items`, else the document
    /// when it is an array, else a JSON Feed's `items`. An HTML page is refused.
    /// A page of more than `room` items (what `max-items` leaves the walk)
    /// is refused as soon as the parse passes it.
    static func document(_ body: [UInt8], shape: FeedShape, contentType: String? = nil, room: Int = .max, url: String? = nil) throws(FeedError) -> Document {
        if let refusal = FeedContent.htmlRefusal(body, contentType: contentType) { throw FeedError(refusal) }
        if let refusal = FeedContent.utf16JSONRefusal(body, contentType: contentType) { throw FeedError(refusal) }
        if XMLFeedReader.looksLikeXML(body) {
            let doc = try xmlDocument(body, shape: shape, contentType: contentType, url: url)
            if doc.count > room { throw tooManyItems(shape, room: room) }
            return doc
        }
        let parsed: (document: JSON, ranges: [Range<Int>]?)
        let path = shape.items?.tokens ?? (firstByte(body) == UInt8(ascii: "{") ? ["items"] : [])
        // A UTF-8 byte order mark, which RFC 8259 (8.1) lets a parser
        // ignore, is read as whitespace: the items' ranges stay the body's.
        let parseable = FeedContent.blankingByteOrderMark(body)
        do throws(JSONError) { parsed = try JSONParser.parseDocument(parseable, capturingArrayAt: path, maxElements: max(room, 0)) }
        catch {
            if error.elementLimit != nil { throw tooManyItems(shape, room: room) }
            if error.stopped { throw FeedError.stopping }
            throw FeedError(FeedContent.notAFeed(body, contentType: contentType) ?? "\(error)")
        }
        let root = parsed.document
        let isJSONFeed = root["version"]?.string?.hasPrefix(jsonFeedVersionPrefix) ?? false
        guard let ranges = parsed.ranges, JSONPointer.resolve(path, in: root)?.array != nil else {
            throw FeedError(missingItems(root, shape: shape, isJSONFeed: isJSONFeed))
        }
        if shape.items == nil, !path.isEmpty, !isJSONFeed { throw FeedError(missingItems(root, shape: shape, isJSONFeed: false)) }
        var doc = Document(values: nil, ranges: ranges, path: path, itemPointer: shape.item, facts: PageFacts())
        var hasher = Hasher()
        for r in ranges { hasher.combine(r.count); body[r].withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) } }
        let nextPointer = shape.next ?? (isJSONFeed ? .member("next_url") : nil)
        let last = ranges.isEmpty ? nil : doc.item(ranges.count - 1, in: body).value
        let items = doc
        doc.facts = try PageFacts.read(root, itemCount: ranges.count, lastItem: last, shape: shape, nextPointer: nextPointer) { p in
            items.resolve(p, root: root, in: body)
        }
        doc.facts.digest = hasher.finalize()
        return doc
    }

    /// An RSS or Atom page: its entries as JSON Feed 1.1 items, its `rel="next"` link.
    static func xmlDocument(_ body: [UInt8], shape: FeedShape, contentType: String?, url: String? = nil) throws(FeedError) -> Document {
        let page = try XMLFeedReader.read(body, charset: FeedContent.charset(contentType), url: url)
        var facts = PageFacts()
        facts.items = page.items.count
        facts.documentNext = page.next
        // RSS and Atom name their next page by a link, which only `link` paging follows.
        if shape.paging != .link, let next = page.next {
            facts.hint = MoreHint(pointer: "<link rel=\"next\">", value: MoreHint.quoted(.string(next)), advice: "set \(shape.prefix)-paging = link")
        }
        var hasher = Hasher()
        var looks = StopLooks(every: FeedError.postsBetweenLooks)
        for item in page.items {
            let encoded = item.encoded
            hasher.combine(encoded)
            try looks.step(bytes: encoded.count)
        }
        facts.digest = hasher.finalize()
        return Document(values: page.items, facts: facts)
    }

    /// The refusal of a page with more items than the walk has room for.
    static func tooManyItems(_ shape: FeedShape, room: Int) -> FeedError {
        let setting = shape.setting("max-items")
        return FeedError("the feed holds more than \(setting) \(shape.maxItems) items: this page has more than the \(max(room, 0)) left to it; "
            + "raise \(setting) to store them all (nothing was stored)")
    }

    /// The JSON text of an item as it is stored: the element's own text
    /// without insignificant whitespace, or the value written compactly.
    /// The largest post kept, 64 MiB: its `get_post` answer must fit the
    /// line a client reads (`ProtocolLimits.maxAnswerLine`, docs/protocol.md,
    /// "What the clients refuse"); a feed document, bounded by
    /// `feed-max-size`, may hold a larger one, which is skipped and counted
    /// as invalid rather than stored where no client could read it.
    static let maxPostBytes = 64 << 20

    static func text(_ item: Item, in body: [UInt8]) -> [UInt8] {
        if let range = item.range { return JSONParser.minify(body[range]) }
        return item.value?.encoded ?? []
    }

    /// What a `next` member holds: a URL, a JSON:API link object
    /// (`{"href": ...}`), or null or "" for the last page.
    static func nextURL(_ value: JSON, pointer: JSONPointer, setting: String) throws(FeedError) -> String? {
        switch value {
        case .null: return nil
        case .string(let s): return s.isEmpty ? nil : s
        case .object:
            if let href = value["href"]?.string { return href.isEmpty ? nil : href }
            fallthrough
        default:
            throw FeedError("\(setting) \(pointer) is \(value.kindName), not a URL (a string, or null on the last page)")
        }
    }

    /// The refusal when the items are not where the shape says.
    static func missingItems(_ root: JSON, shape: FeedShape, isJSONFeed: Bool) -> String {
        guard let pointer = shape.items else {
            if isJSONFeed { return "a JSON Feed without an items array" }
            var text = "expected a JSON array of posts, or a JSON Feed, but the document is \(root.kindName)"
            if case .object(let members) = root {
                let arrays = members.filter { $0.1.array != nil }.prefix(5).map { "/" + JSONPointer.escaped($0.0) }
                text += arrays.isEmpty ? "" : " with an array at \(arrays.joined(separator: ", "))"
            }
            return text + "; set \(shape.setting("items")) to the JSON Pointer of the array"
        }
        if let why = pointer.whyNothing(in: root) { return "\(shape.setting("items")) \(pointer) names nothing: \(why)" }
        return "\(shape.setting("items")) \(pointer) is \(pointer.resolve(in: root)?.kindName ?? "nothing"), not an array"
    }

    private static func firstByte(_ body: [UInt8]) -> UInt8? { FeedContent.start(of: body).first }

    /// Decodes one page of a posts feed. A page whose items are not where
    /// the shape says throws; bad elements are skipped and counted (and
    /// those that are no post at all apart: `notPosts`).
    public static func postsPage(_ body: [UInt8], shape: FeedShape, id: JSONPointer, contentType: String? = nil,
                                 room: Int = .max, url: String? = nil) throws(FeedError) -> DecodedPostsPage {
        var shared = body
        return try postsPage(&shared, shape: shape, id: id, contentType: contentType, room: room, url: url, discarding: false)
    }

    /// `postsPage`, of a body handed over: as the posts of a large JSON page
    /// are copied out, the pages of the body behind them go back to the
    /// kernel (`Memory.discard`), so the document and its posts are not
    /// resident together (a million-post document of 275 MiB: issue 34).
    /// A body the caller still shares is copied once before its pages are
    /// given back (never changed under another holder): the refresh's is
    /// not shared (`PageBody.take`), a test's may be.
    public static func postsPage(consuming body: consuming [UInt8], shape: FeedShape, id: JSONPointer, contentType: String? = nil,
                                 room: Int = .max, url: String? = nil) throws(FeedError) -> DecodedPostsPage {
        var owned = consume body
        let large = owned.count >= Memory.largeBody
        return try postsPage(&owned, shape: shape, id: id, contentType: contentType, room: room, url: url, discarding: large)
    }

    /// The bytes read between two give-backs.
    static let discardStep = 4 << 20

    private static func postsPage(_ body: inout [UInt8], shape: FeedShape, id: JSONPointer, contentType: String?,
                                  room: Int, url: String?, discarding: Bool) throws(FeedError) -> DecodedPostsPage {
        let doc = try document(body, shape: shape, contentType: contentType, room: room, url: url)
        var posts: [(id: PostID, json: [UInt8])] = []
        posts.reserveCapacity(doc.count)
        var invalid = 0
        var problems: [String] = []
        var notPosts = 0
        var firstNotPost: String?
        func notAPost(_ why: String) {
            invalid += 1
            notPosts += 1
            problems.append(why)
            if firstNotPost == nil { firstNotPost = why }
        }
        // The bytes given back so far; only a JSON page's (its items are ranges, read in order).
        var given = 0
        let discards = discarding && doc.values == nil
        var looks = StopLooks(every: doc.values == nil ? StopFlag.itemsBetweenLooks : FeedError.postsBetweenLooks)
        for index in 0..<doc.count {
            try looks.step(bytes: doc.values == nil ? doc.ranges[index].count : 0)
            let element = doc.item(index, in: body)
            defer {
                if discards, doc.ranges[index].upperBound - given >= discardStep {
                    given = body.withUnsafeMutableBytes { Memory.discard($0, from: given, before: doc.ranges[index].upperBound) }
                }
            }
            guard let value = element.value, value.isObject else {
                notAPost(element.value == nil ? "element \(index) has no object at \(shape.setting("item")) \(shape.item?.description ?? "")"
                                              : "element \(index) is not an object")
                continue
            }
            switch postID(value, pointer: id) {
            case .success(let postID):
                let json = text(element, in: body)
                guard json.count <= Self.maxPostBytes else {
                    invalid += 1
                    problems.append("element \(index) is a post of \(NumberText.grouped(json.count)) bytes, more than the \(NumberText.grouped(Self.maxPostBytes)) "
                                    + "(64 MiB) a post can be: its get_post answer would not fit the line a client reads")
                    continue
                }
                posts.append((postID, json))
            case .failure(let why): notAPost("element \(index) \(why)")
            }
        }
        var page = DecodedPostsPage(posts: posts, invalid: invalid, problems: problems, facts: doc.facts)
        page.notPosts = notPosts
        page.firstNotPost = firstNotPost
        return page
    }

    /// The id at `pointer` in a post: a JSON integer or a non-empty string
    /// of at most 1 KiB; else why not.
    static func postID(_ item: JSON, pointer: JSONPointer) -> Result<PostID, FeedError> {
        guard let value = pointer.resolve(in: item) else { return .failure(FeedError("has no \"\(pointer)\"")) }
        switch value {
        case .number:
            if let i = value.integer { return .success(.int(i)) }
            return .failure(FeedError("has an id that is not an integer or a string: \(String(decoding: value.encoded.prefix(40), as: UTF8.self))"))
        case .string(let s):
            if let id = PostID(string: s) { return .success(id) }
            return .failure(FeedError(s.isEmpty ? "has an empty string id" : "has a string id longer than \(PostID.maxStringBytes) bytes"))
        default:
            return .failure(FeedError("has an id that is \(value.kindName), not an integer or a string"))
        }
    }

    /// Decodes one page of an image manifest: its items' positions are rows.
    /// An item without a string URL keeps its row but cannot be fetched.
    public static func manifestPage(_ body: [UInt8], shape: FeedShape, fields: ItemFields, contentType: String? = nil,
                                    room: Int = .max, url: String? = nil) throws(FeedError) -> DecodedManifestPage {
        let doc = try document(body, shape: shape, contentType: contentType, room: room, url: url)
        var entries: [ManifestEntry] = []
        entries.reserveCapacity(doc.count)
        try doc.forEachItem(in: body) { _, item in
            entries.append(ManifestEntry(url: item.value.flatMap { fields.imageURL.resolve(in: $0)?.string } ?? "",
                                         description: item.value.flatMap { fields.imageDescription.resolve(in: $0)?.string }))
        }
        return DecodedManifestPage(entries: entries, facts: doc.facts)
    }
}

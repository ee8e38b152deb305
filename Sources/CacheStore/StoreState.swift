import CacheSystem

/// The in-memory index: what replaying the log produces.
struct StoreState {
    /// Every post's JSON by id, in an arena (`PostTable`).
    var posts = PostTable()
    /// The posts feed's order as the `postOrder` records left it; it may name
    /// posts that are gone and miss some (`orderPosts` derives the order).
    var recordedOrder: [PostID] = []
    /// Every post once, in the feed's order (`orderPosts`).
    var feedIDs: [PostID] = []
    /// Every post once, in list order: ascending when every id is an
    /// integer, else the feed order (`orderPosts`).
    var listIDs: [PostID] = []
    /// The slot in `posts` of each of `listIDs`: what a search walks.
    var listSlots: [Int32] = []
    /// The manifest's rows, by position (in chunks: growing never copies them).
    var rows = ChunkedArray<Row>()
    /// Every object by hash, with its last use (ms since the epoch), for
    /// least-recently-used eviction.
    var objects = ObjectTable()
    /// The chunk digests of objects larger than one chunk that have them
    /// (`objectChunks` records); dropped with the object.
    var chunks: [Hash128: ChunkDigests] = [:]
    /// Each stored variant of a known object (`variant` records). Its object
    /// is in `objects` too, counted in `bytes` and evicted like any other.
    var variants: [VariantKey: VariantRef] = [:]
    /// Each variant object and how many variants it is (`variants`' values,
    /// counted): what `variant-max-size` weighs.
    var variantObjects: [Hash128: Int] = [:]
    /// The bytes of `variantObjects`.
    var variantBytes: Int64 = 0
    /// Each known feed's pages, as its `validators` or `page` records left them.
    var pages: [Feed: StoredPages] = [:]
    var manifestKnown = false
    /// Objects whose last use changed since the last `access` records were logged.
    var unloggedUse: Set<Hash128> = []
    var bytes: Int64 = 0
    var evictions = 0
    /// Changes whenever a row's URL or the row count changes.
    var manifestGeneration = 0
    /// Changes whenever a post is stored or removed or the feed's order is
    /// recorded: whenever `listIDs` or a post's bytes may change.
    var postsGeneration = 0
    /// Feeds whose logged validators held unsafe values (dropped on replay).
    var damagedValidators: Set<Feed> = []

    mutating func apply(_ record: LogRecord) {
        switch record {
        case let .post(id, json):
            posts.set(id, json)
            postsGeneration += 1
        case let .postRemoved(id):
            posts.remove(id)
            postsGeneration += 1
        case let .manifestSize(count):
            manifestGeneration += 1
            if rows.count > count { rows.removeLast(rows.count - count) }
            while rows.count < count { rows.append(Row(url: "", description: nil, object: nil)) }
            manifestKnown = true
        case let .row(i, url, description):
            growRows(to: i + 1)
            if rows[i].url != url { rows[i].object = nil; rows[i].freshness = nil; manifestGeneration += 1 }
            rows[i].url = url
            rows[i].description = description
        case let .rowObject(i, hash, size, type):
            growRows(to: i + 1)
            let ref = ObjectRef(hash: hash, size: size, type: type)
            if rows[i].object != ref { rows[i].freshness = nil }
            rows[i].object = ref
            if objects.updateValue(ref) == nil { bytes += size }
        case let .objectRemoved(hash):
            removeObjects([hash])
        case let .validators(feed, etag, lastModified):
            // Damaged validators (written by 0.1.0 with a trailing CRLF) are
            // dropped, so the next refresh is unconditional and stores clean ones.
            let v = Validators(etag: etag, lastModified: lastModified)
            damagedValidators.remove(feed)
            if v.isDamaged { damagedValidators.insert(feed) }
            pages[feed] = .validators(v.sanitized)
            if feed == .manifest { manifestKnown = true }
        case let .postOrder(start, ids):
            postsGeneration += 1
            recordedOrder.removeSubrange(min(start, recordedOrder.count)...)
            recordedOrder.append(contentsOf: ids)
        case let .page(feed, index, page):
            var list: [FeedPage] = []
            if index > 0, case .pages(let old)? = pages[feed] { list = Array(old.prefix(index)) }
            else { damagedValidators.remove(feed) }
            if page.validators.isDamaged { damagedValidators.insert(feed) }
            list.append(page.sanitized)
            pages[feed] = .pages(list)
            if feed == .manifest { manifestKnown = true }
        case let .access(hash, time):
            objects.noteUse(hash, at: time)
        case let .rowFreshness(i, freshness):
            // Only of a row with an object: what it says is about that object.
            if rows.indices.contains(i), rows[i].object != nil { rows[i].freshness = freshness }
        case let .objectChunks(hash, digests):
            // Only of a known object whose size they fit: what they say is about its bytes.
            if let ref = objects[hash], digests.fit(size: ref.size) { chunks[hash] = digests }
        case let .variant(source, spec, v):
            // Only of a known object: a variant says what was made of its bytes.
            guard objects[source] != nil else { break }
            mapVariant(VariantKey(source: source, spec: spec), v)
        case .commit:
            break
        }
    }

    /// Applies a transaction. Runs of `objectRemoved` are applied together,
    /// with one pass over the rows: removing many objects (eviction, gc, a
    /// sweep at start) stays linear in the rows.
    mutating func apply(transaction records: [LogRecord]) {
        reservePosts(for: records)
        // The buckets of the transaction's objects and posts are loaded
        // together, not one miss after another as each record is applied: a
        // replay of 10,000,000 records took 2.70-2.88 s without, 2.40-2.59
        // with. Not for a large transaction (a refresh's, replayed): its
        // first lines would leave the cache before they are used.
        // A large one (a manifest refresh of many rows as it is committed;
        // a replay gives at most `LogScanner.heldRecords` at a time) is
        // prefetched a window ahead of the record applied instead.
        let whole = records.count <= Self.prefetchedTransaction
        if whole { prefetch(records[...]) } else { prefetch(records.prefix(Self.prefetchWindow)) }
        defer { posts.compactIfWasteful() }
        var removed: Set<Hash128> = []
        for (i, r) in records.enumerated() {
            if !whole, i + Self.prefetchWindow < records.count { prefetch(records[(i + Self.prefetchWindow)...].prefix(1)) }
            apply(r, removing: &removed)
        }
        if !removed.isEmpty { removeObjects(removed) }
    }

    /// Transactions of at most this many records are prefetched (a compacted log holds chunks of 64 posts, or of 64 rows with their records).
    static let prefetchedTransaction = 4096
    /// How far ahead a larger transaction's records are prefetched.
    static let prefetchWindow = 32

    /// Starts loading the buckets `records` will probe (`SlotIndex.prefetch`).
    private func prefetch(_ records: ArraySlice<LogRecord>) {
        for r in records {
            switch r {
            case let .rowObject(_, hash, _, _): objects.prefetch(hash)
            case let .post(id, _): posts.prefetch(id)
            default: break
            }
        }
    }

    /// `apply(transaction:)`, emptying `records` as it goes: each record is
    /// let go once applied, so a post's bytes that nothing else holds are
    /// freed as the table copies them in (a posts refresh's), and
    /// `chunkFreed` is called after each arena chunk's worth of them
    /// (`Store.replacePosts` gives the heap's free pages back then).
    mutating func apply(consuming records: inout [LogRecord], chunkFreed: () -> Void = {}) {
        reservePosts(for: records)
        defer { posts.compactIfWasteful() }
        var removed: Set<Hash128> = []
        var freed = 0
        for i in records.indices {
            let r = records[i]
            records[i] = .commit
            if case let .post(_, json) = r { freed += json.count }
            apply(r, removing: &removed)
            if freed >= PostArena.chunkSize {
                chunkFreed()
                freed = 0
            }
        }
        if !removed.isEmpty { removeObjects(removed) }
        records = []
    }

    /// A refresh of a million posts grows the table once, not twenty times.
    private mutating func reservePosts(for records: [LogRecord]) {
        var added = 0
        var bytes = 0
        for case let .post(_, json) in records {
            added += 1
            bytes += json.count
        }
        if added > 1024 { posts.reserve(more: added, bytes: bytes) }
    }

    /// One record of a transaction: a run of `objectRemoved` is gathered in
    /// `removed` and applied together when the run ends.
    private mutating func apply(_ r: LogRecord, removing removed: inout Set<Hash128>) {
        if case let .objectRemoved(hash) = r { removed.insert(hash); return }
        if !removed.isEmpty { removeObjects(removed); removed = [] }
        apply(r)
    }

    /// Forgets objects; every row pointing to one becomes uncached.
    mutating func removeObjects(_ hashes: Set<Hash128>) {
        for hash in hashes {
            if let old = objects.removeValue(forKey: hash) { bytes -= old.size }
            chunks[hash] = nil
            unloggedUse.remove(hash)
        }
        for i in rows.indices {
            if let h = rows[i].object?.hash, hashes.contains(h) { rows[i].object = nil; rows[i].freshness = nil }
        }
        // A variant goes with its own object and with its source's (its
        // object stays known until gc, as an unmapped row's does).
        if !variants.isEmpty {
            for (key, v) in variants where hashes.contains(key.source) || hashes.contains(v.object.hash) { unmapVariant(key) }
        }
    }

    /// Maps `key` to `v`, counting `v`'s object among the variants'.
    private mutating func mapVariant(_ key: VariantKey, _ v: VariantRef) {
        if variants[key] != nil { unmapVariant(key) }
        variants[key] = v
        if objects.updateValue(v.object) == nil { bytes += v.object.size }
        variantObjects[v.object.hash, default: 0] += 1
        if variantObjects[v.object.hash] == 1 { variantBytes += v.object.size }
    }

    /// Forgets the variant `key` (its object stays known).
    private mutating func unmapVariant(_ key: VariantKey) {
        guard let v = variants.removeValue(forKey: key) else { return }
        variantObjects[v.object.hash, default: 1] -= 1
        if variantObjects[v.object.hash] == 0 {
            variantObjects[v.object.hash] = nil
            variantBytes -= v.object.size
        }
    }

    /// The objects that rows map, and the variants of those: what gc keeps.
    var referencedObjects: Set<Hash128> {
        let mapped = Set(rows.compactMap { $0.object?.hash })
        return mapped.union(variants.filter { mapped.contains($0.key.source) }.map(\.value.object.hash))
    }

    private mutating func growRows(to n: Int) {
        while rows.count < n { rows.append(Row(url: "", description: nil, object: nil)) }
    }

    /// Whether the posts feed was ever stored: it has pages.
    var postsKnown: Bool { pages[.posts] != nil }

    /// A feed's pages as stored; empty when the feed is unknown. A feed known
    /// through a `validators` record alone (or a manifest through its size
    /// alone) is one page of unknown URL holding every item.
    func pages(of feed: Feed) -> [FeedPage] {
        let items = feed == .posts ? posts.count : rows.count
        if let stored = pages[feed] { return stored.pages(items: items) }
        if feed == .manifest && manifestKnown { return [FeedPage(url: "", count: items)] }
        return []
    }

    /// Gives back the pages past the last post's bytes, the objects and
    /// the rows (after a replay whose tables grew into arrays a `Prefaulter`
    /// made whole).
    mutating func discardUnusedPages() {
        posts.discardUnusedPages()
        objects.discardUnusedPages()
        rows.discardUnusedPages()
    }

    /// Derives `feedIDs` and `listIDs` from the posts and the recorded order.
    mutating func orderPosts() {
        feedIDs = Self.feedOrder(recorded: recordedOrder, posts: posts)
        // A feed already in id order shares its storage with the list.
        let inOrder = zip(feedIDs, feedIDs.dropFirst()).allSatisfy { PostOrder.precedes($0, $1) }
        listIDs = feedIDs.contains(where: \.isString) || inOrder ? feedIDs : feedIDs.sorted(by: PostOrder.precedes)
        listSlots = posts.slots(of: listIDs)
    }

    /// The feed order of `posts` given the recorded order: the recorded ids
    /// that are posts, each once, then every other post in `PostOrder`. With
    /// no order recorded (a version-1 log) that is ascending id order. The
    /// writer decides whether a refresh needs `postOrder` records with this
    /// same function, so the replay always derives what was written.
    static func feedOrder(recorded: [PostID], posts: PostTable) -> [PostID] {
        feedOrder(recorded: recorded, count: posts.count, ids: posts.keys) { posts.slot(of: $0) != nil }
    }

    /// `feedOrder(recorded:posts:)` of `count` posts, `ids`, with `isPost`
    /// saying whether an id is one of them.
    static func feedOrder(recorded: [PostID], count: Int, ids: some Sequence<PostID>, isPost: (PostID) -> Bool) -> [PostID] {
        var out: [PostID] = []
        out.reserveCapacity(count)
        var placed = Set<PostID>(minimumCapacity: recorded.count)
        for id in recorded where isPost(id) && placed.insert(id).inserted { out.append(id) }
        if out.count < count {
            var rest = placed.isEmpty ? Array(ids) : ids.filter { !placed.contains($0) }
            // Posts replayed from a log are mostly in order already: checked in one pass, not sorted again.
            if !zip(rest, rest.dropFirst()).allSatisfy({ PostOrder.precedes($0, $1) }) { rest.sort(by: PostOrder.precedes) }
            out += rest
        }
        return out
    }

    /// The recorded order a log rewritten from `liveTransactions` replays
    /// to: the whole feed order when it is not ascending id order, else
    /// none. Set once such a rewrite is durable, so that the next refresh
    /// decides whether to log the order against what the log now holds.
    var rewrittenOrder: [PostID] {
        feedIDs != Self.feedOrder(recorded: [], posts: posts) ? feedIDs : []
    }

    /// Transactions that rebuild exactly this state, for compaction.
    ///
    /// Small transactions rather than one, so that damage in a compacted log
    /// loses only what follows it: posts in chunks, the feed order in chunks
    /// (when it is not ascending id order), each chunk of rows with their
    /// mappings, use times and chunk digests, and last each feed's size and pages (a prefix
    /// without them leaves the feed unknown, so the next prefetch refetches
    /// it unconditionally).
    func liveTransactions(chunk: Int = 64) -> [[LogRecord]] {
        var out: [[LogRecord]] = []
        forEachLiveTransaction(chunk: chunk) { out.append($0) }
        return out
    }

    /// `liveTransactions`, each handed to `body` as it is made rather than
    /// all collected: a compaction writes each as it comes, holding one
    /// transaction's copy of the posts at a time.
    func forEachLiveTransaction<E: Error>(chunk: Int = 64, _ body: ([LogRecord]) throws(E) -> Void) throws(E) {
        var current: [LogRecord] = []
        func flush() throws(E) { if !current.isEmpty { try body(current); current = [] } }
        for (n, id) in feedIDs.enumerated() {
            if let json = posts[id] { current.append(.post(id: id, json: json)) }  // a copy: compaction writes a chunk at a time
            if (n + 1) % chunk == 0 { try flush() }
        }
        try flush()
        if feedIDs != Self.feedOrder(recorded: [], posts: posts) {
            for r in PostOrderRecords.records(for: feedIDs) { try body([r]) }
        }
        if postsKnown { try body(Self.pageRecords(.posts, pages[.posts]!)) }
        // One use time and one set of chunk digests per object, after the first
        // row that maps it (several rows may share one object: these are the object's).
        var timed = Set<Hash128>()
        for (i, row) in rows.enumerated() {
            current.append(.row(row: i, url: row.url, description: row.description))
            if let o = row.object {
                current.append(.rowObject(row: i, hash: o.hash, size: o.size, type: o.type))
                if let f = row.freshness { current.append(.rowFreshness(row: i, freshness: f)) }
                if timed.insert(o.hash).inserted {
                    if let t = objects.lastUse(o.hash) { current.append(.access(hash: o.hash, time: t)) }
                    if let c = chunks[o.hash] { current.append(.objectChunks(hash: o.hash, chunks: c)) }
                }
            }
            if (i + 1) % chunk == 0 { try flush() }
        }
        try flush()
        // Variants after every row, so their sources are known when they replay.
        for (n, (key, v)) in variants.sorted(by: { $0.key < $1.key }).enumerated() {
            current.append(.variant(source: key.source, spec: key.spec, variant: v))
            if timed.insert(v.object.hash).inserted {
                if let t = objects.lastUse(v.object.hash) { current.append(.access(hash: v.object.hash, time: t)) }
                if let c = chunks[v.object.hash] { current.append(.objectChunks(hash: v.object.hash, chunks: c)) }
            }
            if (n + 1) % chunk == 0 { try flush() }
        }
        try flush()
        if manifestKnown {
            try body([.manifestSize(count: rows.count)] + (pages[.manifest].map { Self.pageRecords(.manifest, $0) } ?? []))
        }
    }

    /// The records that store `stored` as `feed`'s pages: a `validators`
    /// record for what version 1 holds, else one `page` record per page.
    static func pageRecords(_ feed: Feed, _ stored: StoredPages) -> [LogRecord] {
        switch stored {
        case .validators(let v): [.validators(feed: feed, etag: v.etag, lastModified: v.lastModified)]
        case .pages(let list): pageRecords(feed, list)
        }
    }

    /// The records that store `list` as `feed`'s pages (`pageRecords(_:_:)`).
    static func pageRecords(_ feed: Feed, _ list: [FeedPage]) -> [LogRecord] {
        if FeedPage.isValidatorsOnly(list) {
            let v = list[0].validators
            return [.validators(feed: feed, etag: v.etag, lastModified: v.lastModified)]
        }
        return list.enumerated().map { .page(feed: feed, index: $0.offset, page: $0.element) }
    }
}

/// How a feed order is cut into `postOrder` records: ids can be 1 KiB and a
/// feed 50,000 posts, and no record may be huge.
enum PostOrderRecords {
    /// A record holds at most this many ids.
    static let maxIDs = 4096
    /// A record is closed once its ids take this many bytes.
    static let maxBytes = 64 * 1024

    /// `postOrder` records giving `ids` from position 0 on.
    static func records(for ids: [PostID]) -> [LogRecord] {
        var out: [LogRecord] = []
        var start = 0
        var chunk: [PostID] = []
        var bytes = 0
        for id in ids {
            chunk.append(id)
            bytes += id.isString ? 3 + (id.description.utf8.count) : 10
            if chunk.count == maxIDs || bytes >= maxBytes {
                out.append(.postOrder(start: start, ids: chunk))
                start += chunk.count
                chunk = []
                bytes = 0
            }
        }
        if !chunk.isEmpty || out.isEmpty { out.append(.postOrder(start: start, ids: chunk)) }
        return out
    }
}

import CacheSystem

/// The in-memory index: what replaying the log produces.
struct StoreState {
    var posts: [Int64: [UInt8]] = [:]
    var sortedIDs: [Int64] = []
    var rows: [Row] = []
    var objects: [Hash128: ObjectRef] = [:]
    var validators: [Feed: Validators] = [:]
    var postsKnown = false
    var manifestKnown = false
    /// Last use of each object (ms since the epoch), for least-recently-used eviction.
    var lastUse: [Hash128: Int64] = [:]
    /// Objects whose last use changed since the last `access` records were logged.
    var unloggedUse: Set<Hash128> = []
    var bytes: Int64 = 0
    var evictions = 0
    /// Changes whenever a row's URL or the row count changes.
    var manifestGeneration = 0
    /// Feeds whose logged validators held unsafe values (dropped on replay).
    var damagedValidators: Set<Feed> = []

    mutating func apply(_ record: LogRecord) {
        switch record {
        case let .post(id, json):
            posts[id] = json
        case let .postRemoved(id):
            posts[id] = nil
        case let .manifestSize(count):
            manifestGeneration += 1
            if rows.count > count { rows.removeLast(rows.count - count) }
            while rows.count < count { rows.append(Row(url: "", description: nil, object: nil)) }
            manifestKnown = true
        case let .row(i, url, description):
            growRows(to: i + 1)
            if rows[i].url != url { rows[i].object = nil; manifestGeneration += 1 }
            rows[i].url = url
            rows[i].description = description
        case let .rowObject(i, hash, size, type):
            growRows(to: i + 1)
            let ref = ObjectRef(hash: hash, size: size, type: type)
            rows[i].object = ref
            if objects.updateValue(ref, forKey: hash) == nil { bytes += size }
        case let .objectRemoved(hash):
            removeObjects([hash])
        case let .validators(feed, etag, lastModified):
            // Damaged validators (written by 0.1.0 with a trailing CRLF) are
            // dropped, so the next refresh is unconditional and stores clean ones.
            let v = Validators(etag: etag, lastModified: lastModified)
            if v.isDamaged { damagedValidators.insert(feed) } else { damagedValidators.remove(feed) }
            validators[feed] = v.sanitized
            if feed == .posts { postsKnown = true } else { manifestKnown = true }
        case let .access(hash, time):
            if objects[hash] != nil { lastUse[hash] = max(lastUse[hash] ?? 0, time) }
        case .commit:
            break
        }
    }

    /// Applies a transaction. Runs of `objectRemoved` are applied together,
    /// with one pass over the rows: removing many objects (eviction, gc, a
    /// sweep at start) stays linear in the rows.
    mutating func apply(transaction records: [LogRecord]) {
        var removed: Set<Hash128> = []
        for r in records {
            if case let .objectRemoved(hash) = r { removed.insert(hash); continue }
            if !removed.isEmpty { removeObjects(removed); removed = [] }
            apply(r)
        }
        if !removed.isEmpty { removeObjects(removed) }
    }

    /// Forgets objects; every row pointing to one becomes uncached.
    mutating func removeObjects(_ hashes: Set<Hash128>) {
        for hash in hashes {
            if let old = objects.removeValue(forKey: hash) { bytes -= old.size }
            lastUse[hash] = nil
            unloggedUse.remove(hash)
        }
        for i in rows.indices {
            if let h = rows[i].object?.hash, hashes.contains(h) { rows[i].object = nil }
        }
    }

    private mutating func growRows(to n: Int) {
        while rows.count < n { rows.append(Row(url: "", description: nil, object: nil)) }
    }

    mutating func sortPosts() { sortedIDs = posts.keys.sorted() }

    /// Transactions that rebuild exactly this state, for compaction.
    ///
    /// Small transactions rather than one, so that damage in a compacted log
    /// loses only what follows it: posts in chunks, each chunk of rows with
    /// their mappings and use times, and last the feeds' sizes and validators
    /// (a prefix without them leaves the feed unknown, so the next prefetch
    /// refetches it unconditionally).
    func liveTransactions(chunk: Int = 64) -> [[LogRecord]] {
        var out: [[LogRecord]] = []
        var current: [LogRecord] = []
        func flush() { if !current.isEmpty { out.append(current); current = [] } }
        for (n, id) in sortedIDs.enumerated() {
            if let json = posts[id] { current.append(.post(id: id, json: json)) }
            if (n + 1) % chunk == 0 { flush() }
        }
        flush()
        if let v = validators[.posts] { out.append([.validators(feed: .posts, etag: v.etag, lastModified: v.lastModified)]) }
        else if postsKnown { out.append([.validators(feed: .posts, etag: nil, lastModified: nil)]) }
        // One use time per object, after the first row that maps it (several
        // rows may share one object; their use time is the object's).
        var timed = Set<Hash128>()
        for (i, row) in rows.enumerated() {
            current.append(.row(row: i, url: row.url, description: row.description))
            if let o = row.object {
                current.append(.rowObject(row: i, hash: o.hash, size: o.size, type: o.type))
                if let t = lastUse[o.hash], timed.insert(o.hash).inserted { current.append(.access(hash: o.hash, time: t)) }
            }
            if (i + 1) % chunk == 0 { flush() }
        }
        flush()
        if manifestKnown {
            var last: [LogRecord] = [.manifestSize(count: rows.count)]
            if let v = validators[.manifest] { last.append(.validators(feed: .manifest, etag: v.etag, lastModified: v.lastModified)) }
            out.append(last)
        }
        return out
    }
}

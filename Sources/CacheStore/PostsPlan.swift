import CacheSystem

/// What a posts refresh must do, worked out from the stored posts and the
/// new ones before anything is written: the one transaction's records, the
/// post files to write before it (and what each held, to put back if the
/// refresh fails), and the files to remove after it. Pure: no I/O.
struct PostsPlan {
    /// The stored posts feed, as the plan starts from it.
    struct Stored {
        var posts: PostTable
        var recordedOrder: [PostID]
        var pages: StoredPages?
        /// Its pages held a value dropped on replay: they are logged again.
        var damaged: Bool
    }

    /// The transaction; empty when nothing changed (then nothing is written).
    var records: [LogRecord] = []
    var change = PostsChange()
    /// Post files to write durably before the transaction: file name, bytes.
    var writes: [(name: String, bytes: [UInt8])] = []
    /// The post whose bytes each file of `writes` held before, by name
    /// (absent: no file), for putting it back when the refresh fails.
    var previous: [String: PostID] = [:]
    /// Post files to remove once the transaction is in the log.
    var removals: [String] = []
    /// Posts that get no file: their hashed name is another post's
    /// (`PostFileNames.owners`); answers come from the log's copy.
    var withoutFile: [(id: PostID, name: String, owner: PostID)] = []

    /// The plan that makes `stored` hold `posts` (in feed order; for an id
    /// given twice the last bytes count and the first place) and `pages`
    /// (sanitized). `naming` gives each post's file name (the tests give
    /// one whose hashed names collide).
    init(from stored: Stored, to posts: [(id: PostID, json: [UInt8])], pages: [FeedPage],
         naming: (PostID) -> String = PostFileNames.name(of:)) {
        let new = GivenPosts(posts)
        var changed: [Int32] = []
        for p in 0..<new.count {
            let (id, json) = (new.id(p), new.json(p))
            if stored.posts.holds(id, json) { change.unchanged += 1; continue }
            changed.append(Int32(p))
            records.append(.post(id: id, json: json))
            change.fetched += 1
        }
        let removed = stored.posts.keys.filter { new.position(of: $0) == nil }.sorted(by: PostOrder.precedes)
        records += removed.map { .postRemoved(id: $0) }
        change.removed = removed.count
        // The order is logged only when the replay would not derive it.
        if !Self.replayDerivesOrder(of: new, recorded: stored.recordedOrder) {
            records += PostOrderRecords.records(for: Array(new.ids))
        }
        if stored.damaged || stored.pages != StoredPages(pages) { records += StoreState.pageRecords(.posts, pages) }
        planFiles(stored.posts, new, changed: changed, removed: removed, naming)
    }

    /// Whether a replay derives the order `new` gives (`StoreState.feedOrder`).
    /// With no recorded order the replay sorts the ids, so it derives the
    /// order exactly when the ids are given sorted: checked in one pass,
    /// without building the sorted copy (a million ids, twice).
    static func replayDerivesOrder(of new: GivenPosts, recorded: [PostID]) -> Bool {
        guard recorded.isEmpty else {
            let derived = StoreState.feedOrder(recorded: recorded, count: new.count, ids: new.ids) { new.position(of: $0) != nil }
            return derived.elementsEqual(new.ids)
        }
        return zip(new.ids, new.ids.dropFirst()).allSatisfy { PostOrder.precedes($0, $1) }
    }

    /// The files: each changed post's, unless its hashed name belongs to
    /// another post; a hashed name whose owner changed gets its new owner's
    /// bytes; a removed post's file goes unless its name has a new owner.
    private mutating func planFiles(_ old: PostTable, _ new: GivenPosts, changed: [Int32], removed: [PostID],
                                    _ naming: (PostID) -> String) {
        let oldOwners = PostFileNames.owners(old.keys, naming: naming)
        let newOwners = PostFileNames.owners(new.ids, naming: naming)
        func write(_ name: String, _ bytes: [UInt8], before: PostID?) {
            writes.append((name, bytes))
            // Only files that held something are listed: an unlisted name had none (a new feed lists none).
            if let held = before, old.slot(of: held) != nil { previous[name] = held }
        }
        writes.reserveCapacity(changed.count)
        // Hashed names written so far: only those can come up again below.
        var written = Set<String>()
        for p in changed {
            let id = new.id(Int(p))
            let name = naming(id)
            if let owner = newOwners[name], owner != id {
                withoutFile.append((id, name, owner))
                continue
            }
            let hashed = PostFileNames.isHashed(name)
            write(name, new.json(Int(p)), before: hashed ? oldOwners[name] : id)
            if hashed { written.insert(name) }
        }
        for (name, owner) in newOwners where oldOwners[name] != owner && !written.contains(name) {
            write(name, new.json(of: owner)!, before: oldOwners[name])  // an owner is one of the ids given
        }
        for id in removed {
            let name = naming(id)
            if newOwners[name] == nil { removals.append(name) }
        }
    }
}

extension StoredPages {
    /// How `pages` are stored: a `validators` record's form when that holds them.
    init(_ pages: [FeedPage]) {
        self = FeedPage.isValidatorsOnly(pages) ? .validators(pages[0].validators) : .pages(pages)
    }
}

extension PostFileNames {
    /// For each hashed name (`h_`) among `ids`' names, the post that owns
    /// it: the first in `PostOrder` of the posts whose ids hash alike (an
    /// XXH3-128 collision, which a feed could craft). The others get no file.
    /// Other names are one id's only and are not listed.
    static func owners(_ ids: some Sequence<PostID>, naming: (PostID) -> String = name(of:)) -> [String: PostID] {
        var out: [String: PostID] = [:]
        for id in ids {
            // A string of up to 64 bytes is at most 194 bytes escaped: never hashed.
            guard case .string(let s) = id, s.utf8.count > 64 else { continue }
            let name = naming(id)
            guard isHashed(name) else { continue }
            if let owner = out[name], !PostOrder.precedes(id, owner) { continue }
            out[name] = id
        }
        return out
    }
}

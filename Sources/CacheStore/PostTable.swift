import CacheSystem

/// Every post's JSON, held compactly: the bytes of all posts in a few large
/// chunks (an arena, `PostArena`), each post a slot with its id and where
/// its bytes and its title lie, found by id through an open-addressed table
/// of slot numbers (`SlotIndex`). A million posts of 280 bytes take about
/// 330 MB here, against some 450 MB as one array per post in a dictionary
/// (docs/performance.md, "A million posts"). A value: copies share storage
/// until one is changed.
struct PostTable: Sendable {
    private var arena = PostArena()
    /// Each slot's id; nil: a free slot (its number is in `free`).
    private var ids: [PostID?] = []
    private var spans: [PostArena.Span] = []
    /// Each slot's title as `PostTitle.locate` found it in the post's bytes.
    private var titles: [PostTitle.Ref] = []
    /// The folded titles of posts whose title cannot be compared in place
    /// (escapes, non-ASCII, far in the post): few in most feeds.
    private var foldedTitles: [Int32: [UInt8]] = [:]
    private var free: [Int32] = []
    private var index = SlotIndex()
    /// `set` leaves titles to `locateTitles` (a replay: they are located
    /// once, on every core, after the log is read).
    private(set) var titlesDeferred = false

    init() {}

    /// The number of posts.
    private(set) var count = 0

    /// The bytes of every post together.
    var liveBytes: Int { arena.live }
    /// The arena's bytes of replaced and removed posts, until compaction.
    var deadBytes: Int { arena.dead }

    var isEmpty: Bool { count == 0 }

    /// Every id, in no particular order.
    var keys: some Sequence<PostID> { ids.lazy.compactMap { $0 } }

    /// Starts loading where `id` is probed from (`SlotIndex.prefetch`).
    func prefetch(_ id: PostID) { index.prefetch(hash: id.hashValue) }

    /// The slot of `id`, if it is a post.
    func slot(of id: PostID) -> Int32? {
        index.find(id, hash: id.hashValue, in: ids)
    }

    /// The slot of each of `list` (every one a post): found by id, unless
    /// the list is the slots' own order (a store replayed from a compacted
    /// log), which one pass over the ids tells.
    func slots(of list: [PostID]) -> [Int32] {
        if list.count == ids.count, free.isEmpty, zip(list, ids).allSatisfy({ $0 == $1 }) { return (0..<Int32(list.count)).map { $0 } }
        return list.map { slot(of: $0)! }
    }

    /// The id in `slot`.
    func id(at slot: Int32) -> PostID { ids[Int(slot)]! }

    /// A copy of post `id`'s bytes.
    subscript(id: PostID) -> [UInt8]? {
        guard let s = slot(of: id) else { return nil }
        return arena.bytes(spans[Int(s)])
    }

    /// Post `id`'s bytes, lent to `body` without a copy.
    func withBytes<R>(of id: PostID, _ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard let s = slot(of: id) else { return nil }
        return arena.withBytes(spans[Int(s)], body)
    }

    /// The bytes in `slot`, lent to `body`.
    func withBytes<R>(at slot: Int32, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        arena.withBytes(spans[Int(slot)], body)
    }

    /// The bytes of the posts in `slots`, in that order, lent as a page.
    func bodies(at slots: some Sequence<Int32>) -> PostBodies {
        arena.bodies(slots.map { spans[Int($0)] })
    }

    /// Whether post `id` holds exactly `json`.
    func holds(_ id: PostID, _ json: [UInt8]) -> Bool {
        withBytes(of: id) { b in json.withUnsafeBytes { $0.elementsEqual(b) } } ?? false
    }

    /// Whether the title of the post in `slot` holds `needle` (lowercased
    /// UTF-8), ignoring case; an empty needle is in every post.
    func title(at slot: Int32, holds needle: [UInt8]) -> Bool {
        assert(!titlesDeferred, "a title read before locateTitles")
        if needle.isEmpty { return true }
        let ref = titles[Int(slot)]
        if ref.isFolded { return foldedTitles[slot].map { PostTitle.contains($0, needle) } ?? false }
        if ref.length == 0 { return false }
        return arena.withBytes(spans[Int(slot)]) { post in
            PostTitle.containsFoldingASCII(UnsafeRawBufferPointer(rebasing: post[ref.range]), needle)
        }
    }

    /// Makes room for `more` posts of `bytes` bytes in all, so that a large
    /// transaction grows each part once. At least doubling when it grows:
    /// a transaction replayed in parts (`LogScanner`) reserves part by
    /// part, and `reserveCapacity` to the exact count each time would copy
    /// the arrays once a part.
    mutating func reserve(more: Int, bytes: Int) {
        let needed = count + more
        index.reserve(needed)
        func grow<T>(_ array: inout [T]) {
            if array.capacity < needed { array.reserveCapacity(max(needed, array.capacity * 2)) }
        }
        grow(&ids)
        grow(&spans)
        grow(&titles)
        arena.reserve(bytes)
    }

    /// Stores `json` as post `id`, replacing what it held.
    mutating func set(_ id: PostID, _ json: [UInt8]) {
        let title = titlesDeferred ? .none : PostTitle.locate(in: json)
        let span = arena.append(json)
        let hash = id.hashValue
        if let s = index.find(id, hash: hash, in: ids) {
            arena.release(spans[Int(s)])
            spans[Int(s)] = span
            place(title, json, at: s)
            return
        }
        let s: Int32
        if let reused = free.popLast() {
            s = reused
            ids[Int(s)] = id
            spans[Int(s)] = span
            titles[Int(s)] = .none
        } else {
            s = Int32(ids.count)
            ids.append(id)
            spans.append(span)
            titles.append(.none)
        }
        place(title, json, at: s)
        index.insert(s, hash: hash)
        count += 1
    }

    /// Gives back the pages of the last chunk of the posts' bytes that no
    /// post holds (after a replay, whose chunks were faulted in whole).
    mutating func discardUnusedPages() { arena.discardUnusedPages() }

    /// From now until `locateTitles`, posts are stored without their titles.
    mutating func deferTitles() { titlesDeferred = true }

    /// Locates the title of every post stored since `deferTitles`, the
    /// posts split among up to `threads` threads (one per 4,096 posts at
    /// most): a fifth of a replay's time at
    /// a million posts when located one by one as they were set
    /// (`JSONScan.titleSpan`), and each post's title depends on its bytes alone.
    mutating func locateTitles(threads: Int) {
        guard titlesDeferred else { return }
        titlesDeferred = false
        // The lanes write `titles` through a pointer, unchecked: one entry a slot, as `set` and `remove` keep them.
        precondition(titles.count == ids.count && spans.count == ids.count, "a slot without its title or span")
        let (arena, ids, spans) = (self.arena, self.ids, self.spans)
        let lanes = max(1, min(threads, ids.count / 4096 + 1))
        let folded = Locked<[Int32: [UInt8]]>([:])
        titles.withUnsafeMutableBufferPointer { out in
            // Each lane writes its own range of slots, and nothing else reads them meanwhile.
            nonisolated(unsafe) let out = out
            Threads.parallel(count: lanes, threads: lanes) { lane in
                var mine: [Int32: [UInt8]] = [:]
                for s in (ids.count * lane / lanes)..<(ids.count * (lane + 1) / lanes) where ids[s] != nil {
                    switch arena.withBytes(spans[s], { PostTitle.locate(in: $0) }) {
                    case .none: out[s] = .none
                    case .inPlace(let ref): out[s] = ref
                    case .folded(let bytes): out[s] = .folded; mine[Int32(s)] = bytes
                    }
                }
                folded.withLock { $0.merge(mine) { a, _ in a } }
            }
        }
        foldedTitles.merge(folded.withLock { $0 }) { _, b in b }
    }

    /// Forgets post `id`.
    mutating func remove(_ id: PostID) {
        guard let s = slot(of: id) else { return }
        index.remove(s, hash: id.hashValue)
        arena.release(spans[Int(s)])
        ids[Int(s)] = nil
        spans[Int(s)] = PostArena.Span()
        titles[Int(s)] = .none
        foldedTitles[s] = nil
        free.append(s)
        count -= 1
    }

    /// Moves the live bytes together when more than half the arena is
    /// bytes of replaced or removed posts (at least a chunk of them), a
    /// chunk at a time, so the arena never holds twice its bytes.
    mutating func compactIfWasteful() {
        guard arena.isWasteful else { return }
        arena.compact(&spans)
    }

    private mutating func place(_ title: PostTitle.Located, _ json: [UInt8], at s: Int32) {
        switch title {
        case .none: titles[Int(s)] = .none; foldedTitles[s] = nil
        case .inPlace(let ref): titles[Int(s)] = ref; foldedTitles[s] = nil
        case .folded(let bytes): titles[Int(s)] = .folded; foldedTitles[s] = bytes
        }
    }
}

extension PostTable: Equatable {
    /// The same ids with the same bytes (a test's comparison: it reads every post).
    static func == (a: PostTable, b: PostTable) -> Bool {
        a.count == b.count && a.keys.allSatisfy { id in a[id].map { b.holds(id, $0) } ?? false }
    }
}

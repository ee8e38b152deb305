import CacheSystem

/// Post ids to slot numbers: an open-addressed table (linear probing,
/// deletion by backward shift) of 4-byte slots, at most three quarters
/// full; the ids themselves are the table's owner's (`ids`). About 8 MB
/// for a million posts, against some 56 MB as a `[PostID: Int32]`. Hashed
/// with `PostID.hashValue`, seeded per process: a feed cannot choose ids
/// that collide.
struct SlotIndex: Sendable {
    private var buckets: [Int32] = []
    private var used = 0

    private var mask: Int { buckets.count - 1 }

    /// The slot holding `id`.
    func find(_ id: PostID, in ids: [PostID?]) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        var i = id.hashValue & mask
        while true {
            let s = buckets[i]
            if s < 0 { return nil }
            if ids[Int(s)] == id { return s }
            i = (i + 1) & mask
        }
    }

    /// Adds `slot`, whose id hashes to `hash` (not yet in the table).
    mutating func insert(_ slot: Int32, hash: Int, ids: [PostID?]) {
        if (used + 1) * 4 > buckets.count * 3 { rehash(capacity: max(16, buckets.count * 2), ids: ids) }
        var i = hash & mask
        while buckets[i] >= 0 { i = (i + 1) & mask }
        buckets[i] = slot
        used += 1
    }

    /// Removes `slot`, whose id hashes to `hash`.
    mutating func remove(_ slot: Int32, hash: Int, ids: [PostID?]) {
        guard !buckets.isEmpty else { return }
        var i = hash & mask
        while buckets[i] != slot {
            if buckets[i] < 0 { return }
            i = (i + 1) & mask
        }
        // Shift back each following entry that may not sit past the hole.
        var j = i
        while true {
            j = (j + 1) & mask
            let s = buckets[j]
            if s < 0 { break }
            let home = ids[Int(s)]!.hashValue & mask
            let stays = i <= j ? (i < home && home <= j) : (i < home || home <= j)
            if stays { continue }
            buckets[i] = s
            i = j
        }
        buckets[i] = -1
        used -= 1
    }

    /// Grows the table to hold `count` entries without growing again.
    mutating func reserve(_ count: Int, ids: [PostID?]) {
        guard count * 4 > buckets.count * 3 else { return }
        var capacity = 16
        while count * 4 > capacity * 3 { capacity *= 2 }
        rehash(capacity: capacity, ids: ids)
    }

    private mutating func rehash(capacity: Int, ids: [PostID?]) {
        let old = buckets
        buckets = [Int32](repeating: -1, count: capacity)
        for s in old where s >= 0 {
            var i = ids[Int(s)]!.hashValue & mask
            while buckets[i] >= 0 { i = (i + 1) & mask }
            buckets[i] = s
        }
    }
}

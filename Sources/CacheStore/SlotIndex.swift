import CacheSystem
import CLinux

/// Keys to slot numbers (post ids in `PostTable`, object hashes in
/// `ObjectTable`): an open-addressed table (linear probing,
/// deletion by backward shift), at most three quarters full, of 8-byte
/// entries, each a slot number and 32 bits of its id's hash: a probe
/// compares hashes in the table and reads an id (the owner's `ids`) only
/// when they agree, and growing never hashes an id again. About 16 MB for
/// a million posts, against some 56 MB as a `[PostID: Int32]`. The owner
/// hashes each key, seeded so that an origin cannot choose keys that
/// collide: `PostID.hashValue` (seeded per process) in `PostTable`, a keyed
/// multiply of the digest's halves in `ObjectTable`.
struct SlotIndex: Sendable {
    private var buckets: [UInt64] = []
    private var used = 0

    private static let empty = UInt64.max
    private var mask: Int { buckets.count - 1 }

    @inline(__always) private static func short(_ hash: Int) -> UInt32 { UInt32(truncatingIfNeeded: hash) }
    @inline(__always) private static func entry(_ slot: Int32, _ short: UInt32) -> UInt64 { UInt64(short) << 32 | UInt64(UInt32(bitPattern: slot)) }
    @inline(__always) private static func slot(_ e: UInt64) -> Int32 { Int32(bitPattern: UInt32(truncatingIfNeeded: e)) }
    @inline(__always) private static func short(of e: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: e >> 32) }

    /// The slot holding `id`, whose hash is `hash`.
    func find(_ id: PostID, hash: Int, in ids: [PostID?]) -> Int32? {
        find(hash: hash) { ids[Int($0)] == id }
    }

    /// The slot whose key hashes to `hash` and for which `holdsKey` is true.
    @inline(__always)
    func find(hash: Int, where holdsKey: (Int32) -> Bool) -> Int32? {
        guard !buckets.isEmpty else { return nil }
        let h = Self.short(hash)
        var i = Int(h) & mask
        while true {
            let e = buckets[i]
            if e == Self.empty { return nil }
            if Self.short(of: e) == h, holdsKey(Self.slot(e)) { return Self.slot(e) }
            i = (i + 1) & mask
        }
    }

    /// Starts loading the bucket a key hashing to `hash` is probed from, so
    /// that a `find` or `insert` of it soon after does not wait for memory.
    @inline(__always)
    func prefetch(hash: Int) {
        guard !buckets.isEmpty else { return }
        buckets.withUnsafeBufferPointer { clinux_prefetch($0.baseAddress! + (Int(Self.short(hash)) & mask)) }
    }

    /// The entry of slot `from`, whose key hashes to `hash`, names slot `to`
    /// instead (its key moved there).
    mutating func renumber(_ from: Int32, to: Int32, hash: Int) {
        guard !buckets.isEmpty else { return }
        let h = Self.short(hash)
        var i = Int(h) & mask
        while buckets[i] != Self.empty {
            if Self.slot(buckets[i]) == from { buckets[i] = Self.entry(to, h); return }
            i = (i + 1) & mask
        }
    }

    /// Adds `slot`, whose id hashes to `hash` (not yet in the table).
    mutating func insert(_ slot: Int32, hash: Int) {
        if (used + 1) * 4 > buckets.count * 3 { rehash(capacity: max(16, buckets.count * 2)) }
        // Half way from the last growth (at 3/8 full) to the next (at 3/4),
        // in a replay: the next buckets are made ahead.
        if used * 16 < buckets.count * 9, (used + 1) * 16 >= buckets.count * 9, buckets.count >= Self.prefaultedBuckets {
            Prefaulter.current?.prepare(Self.prefaulted(buckets.count * 2), filledWith: Self.empty)
        }
        let h = Self.short(hash)
        var i = Int(h) & mask
        while buckets[i] != Self.empty { i = (i + 1) & mask }
        buckets[i] = Self.entry(slot, h)
        used += 1
    }

    /// Removes `slot`, whose id hashes to `hash`.
    mutating func remove(_ slot: Int32, hash: Int) {
        guard !buckets.isEmpty else { return }
        var i = Int(Self.short(hash)) & mask
        while Self.slot(buckets[i]) != slot {
            if buckets[i] == Self.empty { return }
            i = (i + 1) & mask
        }
        // Shift back each following entry that may not sit past the hole.
        var j = i
        while true {
            j = (j + 1) & mask
            let e = buckets[j]
            if e == Self.empty { break }
            let home = Int(Self.short(of: e)) & mask
            let stays = i <= j ? (i < home && home <= j) : (i < home || home <= j)
            if stays { continue }
            buckets[i] = e
            i = j
        }
        buckets[i] = Self.empty
        used -= 1
    }

    /// Buckets from this many on are made ahead in a replay (half a MiB).
    static let prefaultedBuckets = 1 << 16

    private static func prefaulted(_ capacity: Int) -> Prefaulter.Key<UInt64> {
        Prefaulter.Key(purpose: 3, capacity: capacity)
    }

    /// Grows the table to hold `count` entries without growing again.
    mutating func reserve(_ count: Int) {
        guard count * 4 > buckets.count * 3 else { return }
        var capacity = 16
        while count * 4 > capacity * 3 { capacity *= 2 }
        rehash(capacity: capacity)
    }

    private mutating func rehash(capacity: Int) {
        let old = buckets
        // A jump past the doubling (`reserve`): the doubled buckets asked for will never be taken.
        if capacity > buckets.count * 2, buckets.count >= Self.prefaultedBuckets {
            Prefaulter.current?.withdraw(Self.prefaulted(buckets.count * 2))
        }
        buckets = Prefaulter.current?.take(Self.prefaulted(capacity), withdrawing: true)
            ?? [UInt64](repeating: Self.empty, count: capacity)
        for e in old where e != Self.empty {
            var i = Int(Self.short(of: e)) & mask
            while buckets[i] != Self.empty { i = (i + 1) & mask }
            buckets[i] = e
        }
    }
}

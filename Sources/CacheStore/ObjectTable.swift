import CacheSystem

/// Every object the index knows, by hash, with its last use: the objects
/// in a dense array (`ObjectRef` holds its own hash), found through a
/// `SlotIndex`; a removed object's place is taken by the last one. What a
/// `[Hash128: ObjectRef]` and a `[Hash128: Int64]` of use times did, with
/// one probe where a use record took three, and growth that never hashes a
/// key again: replaying 10,000,000 log records spent half its time hashing
/// and rehashing those two dictionaries (issue 34, point 7; docs/performance.md).
///
/// The keys are XXH3-128 digests, uniform already, so a keyed folded
/// multiply of both halves places them (seeded per table from the system's
/// random source): an origin that chooses its images' bytes cannot make
/// their places collide without the seed.
struct ObjectTable: Sendable, Equatable {
    private var refs: [ObjectRef] = []
    /// Each object's last use (ms since the epoch); `Self.unused`: none recorded.
    private var uses: [Int64] = []
    private var index = SlotIndex()
    private let seed: (UInt64, UInt64)

    private static let unused = Int64.min

    init() {
        var random = SystemRandomNumberGenerator()
        seed = (random.next(), random.next())
    }

    /// The number of objects.
    var count: Int { refs.count }
    var isEmpty: Bool { refs.isEmpty }
    /// Every object, in no particular order.
    var values: [ObjectRef] { refs }
    /// Every object's hash, in no particular order.
    var keys: some Collection<Hash128> { refs.lazy.map(\.hash) }

    @inline(__always)
    private func place(_ hash: Hash128) -> Int {
        let p = (hash.low ^ seed.0).multipliedFullWidth(by: hash.high ^ seed.1)
        return Int(truncatingIfNeeded: p.high ^ p.low)
    }

    /// Starts loading where `hash` is probed from (`SlotIndex.prefetch`).
    @inline(__always)
    func prefetch(_ hash: Hash128) { index.prefetch(hash: place(hash)) }

    @inline(__always)
    private func slot(of hash: Hash128) -> Int32? {
        index.find(hash: place(hash)) { refs[Int($0)].hash == hash }
    }

    /// The object named `hash`, if known.
    subscript(hash: Hash128) -> ObjectRef? {
        slot(of: hash).map { refs[Int($0)] }
    }

    /// Records `ref` under its hash; the object it replaced, if any (its
    /// last use stays).
    @discardableResult
    mutating func updateValue(_ ref: ObjectRef) -> ObjectRef? {
        if let s = slot(of: ref.hash) {
            let old = refs[Int(s)]
            refs[Int(s)] = ref
            return old
        }
        index.insert(Int32(refs.count), hash: place(ref.hash))
        if refs.count >= Self.prefaultedCount, Self.growsAhead(refs) || Self.growsAhead(uses),
           let prefaulter = Prefaulter.current {
            growAhead(prefaulter)
        }
        refs.append(ref)
        uses.append(Self.unused)
        return nil
    }

    /// From this many objects on the arrays' growth is made ahead in a
    /// replay (`Prefaulter`).
    static let prefaultedCount = 1 << 14

    /// Gives back the pages of the arrays' room past their objects (after a
    /// replay: arrays a `Prefaulter` made are faulted in whole).
    mutating func discardUnusedPages() {
        Memory.discardUnused(&refs)
        Memory.discardUnused(&uses)
    }

    /// Three quarters full (half way from the last doubling to the next):
    /// the doubled array is asked for; full: it is taken (when made) and
    /// the elements moved into it. Each array by its own capacity (their
    /// elements' sizes differ, and so, from malloc's rounding, may the two).
    private mutating func growAhead(_ prefaulter: Prefaulter) {
        Self.growAhead(&refs, purpose: 4, prefaulter)
        Self.growAhead(&uses, purpose: 5, prefaulter)
    }

    /// Whether `array` is at a point where `growAhead` does something.
    @inline(__always)
    private static func growsAhead<Element>(_ array: [Element]) -> Bool {
        array.count == array.capacity - array.capacity / 4 || array.count == array.capacity
    }

    private static func growAhead<Element: Sendable>(_ array: inout [Element], purpose: Int, _ prefaulter: Prefaulter) {
        let (count, capacity) = (array.count, array.capacity)
        let key = Prefaulter.Key<Element>(purpose: purpose, capacity: capacity * 2)
        if count == capacity - capacity / 4 {
            prefaulter.prepare(key)
        } else if count == capacity, var made = prefaulter.take(key, withdrawing: true) {
            made.append(contentsOf: array)
            array = made
        }
    }

    /// Forgets object `hash` and its last use; what it was, if known.
    @discardableResult
    mutating func removeValue(forKey hash: Hash128) -> ObjectRef? {
        guard let s = slot(of: hash) else { return nil }
        let old = refs[Int(s)]
        index.remove(s, hash: place(hash))
        let last = Int32(refs.count - 1)
        if s != last {
            index.renumber(last, to: s, hash: place(refs[Int(last)].hash))
            refs[Int(s)] = refs[Int(last)]
            uses[Int(s)] = uses[Int(last)]
        }
        refs.removeLast()
        uses.removeLast()
        return old
    }

    /// Object `hash`'s last use, if one is recorded.
    func lastUse(_ hash: Hash128) -> Int64? {
        guard let s = slot(of: hash), uses[Int(s)] != Self.unused else { return nil }
        return uses[Int(s)]
    }

    /// Object `hash` was used at `time`: its last use moves to it, never
    /// back, and never before 0 (the epoch). Nothing for an object not known.
    mutating func noteUse(_ hash: Hash128, at time: Int64) {
        guard let s = slot(of: hash) else { return }
        uses[Int(s)] = max(uses[Int(s)], time, 0)
    }

    /// Object `hash`'s last use is `time`, later or not; false (and nothing
    /// done) for an object not known.
    @discardableResult
    mutating func setLastUse(_ hash: Hash128, _ time: Int64) -> Bool {
        guard let s = slot(of: hash) else { return false }
        uses[Int(s)] = time
        return true
    }

    /// Every recorded last use, by hash (for tests and comparisons).
    var lastUses: [Hash128: Int64] {
        var out: [Hash128: Int64] = [:]
        for (ref, use) in zip(refs, uses) where use != Self.unused { out[ref.hash] = use }
        return out
    }

    /// The same objects with the same last uses, in whatever order.
    static func == (a: ObjectTable, b: ObjectTable) -> Bool {
        a.count == b.count && zip(a.refs, a.uses).allSatisfy { ref, use in
            b[ref.hash] == ref && (b.lastUse(ref.hash) ?? unused) == use
        }
    }
}

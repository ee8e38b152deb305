import CacheSystem

/// The bytes of small objects, kept in memory once read and verified from
/// their files, so that serving one again costs no `open`, `pread` or
/// `close` (the demo's 16 images over HTTP spent a quarter of their time in
/// those three calls). Bounded in total (`capacity`) and per object
/// (`maxObjectSize`); the oldest entries go first. Under `verify-reads =
/// always` the bytes are hashed again each time they are served (from
/// memory: under a microsecond for the sizes kept here); under `on-change`
/// they are not. An object forgotten by the index is dropped from here too
/// (`Store.forgetCached`).
extension Store {
    /// The largest object whose bytes are kept in memory once read (`SmallObjects`).
    public static var keptObjectSize: Int64 { Int64(SmallObjects.maxObjectSize) }
}

struct SmallObjects: Sendable {
    /// Objects of at most 64 KiB are kept.
    static let maxObjectSize = 64 * 1024
    /// 16 MiB in all.
    static let capacity = 16 << 20

    private var bytes: [Hash128: [UInt8]] = [:]
    private var order: [Hash128] = []
    private var head = 0
    private(set) var total = 0

    func get(_ hash: Hash128) -> [UInt8]? { bytes[hash] }

    /// Keeps `body` for `hash` (when small enough), dropping the oldest entries past `capacity`.
    mutating func put(_ hash: Hash128, _ body: [UInt8]) {
        guard body.count <= Self.maxObjectSize, bytes[hash] == nil else { return }
        bytes[hash] = body
        order.append(hash)
        total += body.count
        while total > Self.capacity, head < order.count {
            let old = order[head]
            head += 1
            if let gone = bytes.removeValue(forKey: old) { total -= gone.count }
        }
        if head > 1024 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    mutating func remove(_ hashes: Set<Hash128>) {
        for h in hashes {
            if let gone = bytes.removeValue(forKey: h) { total -= gone.count }
        }
    }

    var count: Int { bytes.count }
}

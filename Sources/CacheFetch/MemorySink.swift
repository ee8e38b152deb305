import CacheSystem

/// A sink that keeps the body in memory, up to a limit (for the feed
/// documents). The body arrives in chunks of at most `chunkSize` and is
/// joined once, when it is taken, each chunk freed as soon as it is copied:
/// a body of N bytes costs about N bytes of resident memory at any moment,
/// not the 2N an array doubling as it grows touches (a million-post feed of
/// 288 MB peaked at 512 MB in its last doubling; issue 34).
public final class MemorySink: BodySink {
    /// The largest chunk; the first ones are smaller, growing to it, so a
    /// small body costs a small allocation.
    static let chunkSize = 1 << 20
    /// The first chunk's size.
    static let firstChunkSize = 16 << 10

    private struct Received {
        var chunks: [[UInt8]] = []
        var count = 0
    }

    // The fetch thread appends while the transfer runs, the completion reads
    // after it; the lock (never contended) orders the two.
    private let received = Locked(Received())
    public let limit: Int
    /// The setting `limit` comes from, named when a body passes it.
    public let setting: String

    public init(limit: Int, setting: String = "max-object-size") {
        self.limit = limit
        self.setting = setting
    }

    /// A copy of the body received so far.
    public var bytes: [UInt8] {
        var r = received.withLock { $0 }
        return Self.joined(&r)
    }

    /// The body received, moved out: the sink holds nothing after this, so
    /// the body is freed as soon as its taker lets go of it.
    public func take() -> [UInt8] {
        var r = received.withLock { r in defer { r = Received() }; return r }
        return Self.joined(&r)
    }

    public func receive(_ chunk: UnsafeRawBufferPointer) throws {
        try received.withLock { (r) throws(BodyTooLarge) in
            guard r.count + chunk.count <= limit else { throw BodyTooLarge(limit: limit, setting: setting) }
            var rest = chunk
            while !rest.isEmpty {
                let room = r.chunks.last.map { $0.capacity - $0.count } ?? 0
                if room == 0 {
                    var next: [UInt8] = []
                    next.reserveCapacity(min(max(Self.firstChunkSize, r.count), Self.chunkSize))
                    r.chunks.append(next)
                    continue
                }
                let n = min(room, rest.count)
                r.chunks[r.chunks.count - 1].append(contentsOf: UnsafeRawBufferPointer(rebasing: rest[..<n]))
                rest = UnsafeRawBufferPointer(rebasing: rest[n...])
                r.count += n
            }
        }
    }

    public func reset() { received.withLock { $0 = Received() } }

    /// The chunks as one array, each released once copied when `r` holds
    /// the only reference to it (the joined array's pages are touched only
    /// as they are written).
    private static func joined(_ r: inout Received) -> [UInt8] {
        if r.chunks.count <= 1 { return r.chunks.first ?? [] }
        return [UInt8](unsafeUninitializedCapacity: r.count) { out, initialized in
            var at = 0
            for i in r.chunks.indices {
                let chunk = r.chunks[i]
                r.chunks[i] = []
                chunk.withUnsafeBufferPointer { c in
                    _ = UnsafeMutableBufferPointer(rebasing: out[at..<at + c.count]).initialize(fromContentsOf: c)
                    at += c.count
                }
            }
            initialized = at
        }
    }
}

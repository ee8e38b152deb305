import CacheSystem

/// The XXH3-128 of each chunk of an object's bytes: what lets a range be
/// verified by hashing only the chunks it covers (`Store.openVerifiedRange`).
/// Logged as an `objectChunks` record (type 14, format version 4) for
/// objects larger than one chunk; docs/storage-format.md, "index.log".
public struct ChunkDigests: Sendable, Equatable {
    /// The chunk size as a power of two: chunk `i` is the bytes from
    /// `i << shift`, `1 << shift` of them (the last may be shorter).
    public let shift: UInt8
    /// One digest per chunk, in order.
    public let digests: [Hash128]

    /// The chunk size the store writes: 1 MiB (docs/performance.md, "Ranges").
    public static let defaultShift: UInt8 = 20
    /// The chunk sizes a log may name: 4 KiB to 1 GiB. Another shift is a
    /// value this version does not know (refused as newer, never cut).
    static let knownShifts: ClosedRange<UInt8> = 12...30
    /// The most digests one record holds within `RecordCodec.maxPayload`:
    /// 4 TiB in 1 MiB chunks. A larger object gets none and is verified whole.
    static let maxDigests = (RecordCodec.maxPayload - 64) / 16

    /// Digests of chunks of `1 << shift` bytes, in order.
    public init(shift: UInt8, digests: [Hash128]) {
        self.shift = shift
        self.digests = digests
    }

    /// Bytes per chunk.
    public var chunkSize: Int64 { Int64(1) << Int64(shift) }

    /// How many chunks an object of `size` bytes has in chunks of `1 << shift`.
    public static func count(size: Int64, shift: UInt8) -> Int {
        size <= 0 ? 0 : Int((size - 1) >> Int64(shift)) + 1
    }

    /// Whether these digests can describe an object of `size` bytes: one per
    /// chunk, and more than one (an object of one chunk or less has none).
    public func fit(size: Int64) -> Bool {
        digests.count >= 2 && digests.count == Self.count(size: size, shift: shift)
    }

    /// The chunks overlapping the `length` bytes from `offset` (`length` > 0).
    public func chunks(offset: Int64, length: Int64) -> ClosedRange<Int> {
        Int(offset >> Int64(shift))...Int((offset + length - 1) >> Int64(shift))
    }
}

/// Hashes a stream whole (XXH3-128, the object's name) and by chunk in the
/// same pass: `ObjectWriter` feeds it the download, a whole read
/// (`Store.hashFileInChunks`) the file. The first chunk costs nothing more:
/// its digest is the whole's state when the stream reaches its end (XXH3's
/// digest does not end the stream). Later chunks are hashed a second time,
/// alone, so an object of one chunk or less, the common image, is hashed
/// once, as before chunk digests.
struct ObjectHasher: ~Copyable {
    let shift: UInt8
    private var whole = StreamingHasher()
    /// The chunk being hashed alone (the second and later ones).
    private var chunk = StreamingHasher()
    /// Bytes of that chunk hashed so far.
    private var filled: Int64 = 0
    private var digests: [Hash128] = []
    /// Every byte passed in so far.
    private(set) var size: Int64 = 0

    init(shift: UInt8 = ChunkDigests.defaultShift) { self.shift = shift }

    private var chunkSize: Int64 { Int64(1) << Int64(shift) }

    /// Hashes the next bytes of the stream.
    mutating func update(_ bytes: UnsafeRawBufferPointer) {
        var rest = bytes
        if size < chunkSize {
            let take = Int(min(Int64(rest.count), chunkSize - size))
            whole.update(UnsafeRawBufferPointer(rebasing: rest[..<take]))
            size += Int64(take)
            if size == chunkSize { digests.append(whole.digest()) }
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
        }
        guard !rest.isEmpty else { return }
        whole.update(rest)
        size += Int64(rest.count)
        while !rest.isEmpty {
            let take = Int(min(Int64(rest.count), chunkSize - filled))
            chunk.update(UnsafeRawBufferPointer(rebasing: rest[..<take]))
            filled += Int64(take)
            rest = UnsafeRawBufferPointer(rebasing: rest[take...])
            if filled == chunkSize { closeChunk() }
        }
    }

    /// Starts over, for a retried transfer.
    mutating func reset() {
        whole.reset()
        chunk.reset()
        filled = 0
        digests = []
        size = 0
    }

    /// The XXH3-128 of the stream so far.
    var hash: Hash128 { whole.digest() }

    /// The digests of the stream so far, its last chunk however full, or
    /// nil for a stream of one chunk or less, which needs none.
    var digestsSoFar: ChunkDigests? {
        let all = filled > 0 ? digests + [chunk.digest()] : digests
        guard all.count >= 2, all.count <= ChunkDigests.maxDigests else { return nil }
        return ChunkDigests(shift: shift, digests: all)
    }

    private mutating func closeChunk() {
        digests.append(chunk.digest())
        chunk.reset()
        filled = 0
    }
}

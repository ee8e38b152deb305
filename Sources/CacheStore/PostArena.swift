import CacheSystem

/// The bytes of every post, one after the other in chunks of 16 MiB (a
/// post larger than that has a chunk of its own): no allocation per post,
/// and no copy of the whole when it grows, as one growing array would
/// make (twice its bytes for a moment). A replaced or removed post's bytes
/// stay until `compact`.
struct PostArena: Sendable {
    /// Where one post's bytes are.
    struct Span: Sendable, Equatable {
        var chunk: UInt32 = 0
        var offset: UInt32 = 0
        var count: UInt32 = 0
    }

    /// A chunk's bytes. Its pages are resident only once written.
    static let chunkSize = 16 << 20
    private var chunks: [[UInt8]] = []
    /// The bytes of the posts held.
    private(set) var live = 0
    /// The bytes of replaced and removed posts, until `compact`.
    private(set) var dead = 0

    /// More than half the bytes are dead, and at least a chunk of them.
    var isWasteful: Bool { dead >= Self.chunkSize && dead > live }

    /// Appends `bytes`; where they are.
    mutating func append(_ bytes: [UInt8]) -> Span {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Appends `bytes`; where they are.
    mutating func append(_ bytes: UnsafeRawBufferPointer) -> Span {
        // A post is a part of a feed document: never near 4 GiB (feed-max-size is at most that).
        precondition(bytes.count < Int(UInt32.max), "a post of 4 GiB")
        if chunks.isEmpty || chunks[chunks.count - 1].count + bytes.count > Self.chunkSize {
            let prefaulter = Prefaulter.current
            // A chunk made ahead was faulted in whole: the room this one's
            // last post left unfilled is given back as the next one starts.
            if prefaulter != nil, !chunks.isEmpty { Memory.discardUnused(&chunks[chunks.count - 1]) }
            chunks.append(Self.newChunk(for: bytes.count, prefaulter))
        }
        let c = chunks.count - 1
        let offset = chunks[c].count
        chunks[c].append(contentsOf: bytes)
        live += bytes.count
        return Span(chunk: UInt32(c), offset: UInt32(offset), count: UInt32(bytes.count))
    }

    private static let prefaulted = Prefaulter.Key<UInt8>(purpose: 1, capacity: chunkSize)

    /// An empty chunk for a post of `count` bytes: during a replay (a
    /// `prefaulter`) the one made ahead, and the next asked for.
    private static func newChunk(for count: Int, _ prefaulter: Prefaulter?) -> [UInt8] {
        if count <= chunkSize, let prefaulter {
            defer { prefaulter.prepare(prefaulted) }
            if let made = prefaulter.take(prefaulted) { return made }
        }
        var chunk: [UInt8] = []
        chunk.reserveCapacity(max(chunkSize, count))
        return chunk
    }

    /// Gives back the pages of the last chunk past its bytes (a chunk made
    /// by a `Prefaulter` is faulted in whole; those before the last gave
    /// theirs back as the next began).
    mutating func discardUnusedPages() {
        guard !chunks.isEmpty else { return }
        Memory.discardUnused(&chunks[chunks.count - 1])
    }

    /// The bytes at `span` are no longer a post's.
    mutating func release(_ span: Span) {
        live -= Int(span.count)
        dead += Int(span.count)
    }

    /// A copy of the bytes at `span`.
    func bytes(_ span: Span) -> [UInt8] {
        withBytes(span) { Array($0) }
    }

    /// The bytes at `span`, lent to `body`.
    func withBytes<R>(_ span: Span, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        chunks[Int(span.chunk)].withUnsafeBytes { all in
            body(UnsafeRawBufferPointer(rebasing: all[Int(span.offset)..<Int(span.offset) + Int(span.count)]))
        }
    }

    /// The bytes at `spans`, lent as a page: the chunks shared, not copied,
    /// and only those the spans name (a page held while the arena is
    /// compacted keeps its own chunks alive, not every old one).
    func bodies(_ spans: [Span]) -> PostBodies {
        var lent: [[UInt8]] = []
        var renumbered: [UInt32: UInt32] = [:]
        var last: (old: UInt32, new: UInt32)?
        let mapped = spans.map { span -> Span in
            var s = span
            if let l = last, l.old == span.chunk { s.chunk = l.new; return s }
            if let n = renumbered[span.chunk] {
                s.chunk = n
            } else {
                s.chunk = UInt32(lent.count)
                renumbered[span.chunk] = s.chunk
                lent.append(chunks[Int(span.chunk)])
            }
            last = (span.chunk, s.chunk)
            return s
        }
        return PostBodies(chunks: lent, spans: mapped)
    }

    /// Makes room for `bytes` more: only the list of chunks; a chunk's
    /// pages are resident only once written.
    mutating func reserve(_ bytes: Int) {
        chunks.reserveCapacity(chunks.count + bytes / Self.chunkSize + 1)
    }

    /// Moves the live bytes (those `spans` name; a span of no bytes is a
    /// free slot's) into new chunks, updating `spans`. Each old chunk is
    /// freed once its posts are moved, so the arena holds its live bytes
    /// plus a chunk at most meanwhile.
    mutating func compact(_ spans: inout [Span]) {
        var byChunk = [[Int32]](repeating: [], count: chunks.count)
        for (slot, span) in spans.enumerated() where span.count > 0 { byChunk[Int(span.chunk)].append(Int32(slot)) }
        var fresh = PostArena()
        for c in chunks.indices {
            for slot in byChunk[c] {
                spans[Int(slot)] = chunks[c].withUnsafeBytes { all in
                    let s = spans[Int(slot)]
                    return fresh.append(UnsafeRawBufferPointer(rebasing: all[Int(s.offset)..<Int(s.offset) + Int(s.count)]))
                }
            }
            chunks[c] = []
        }
        self = fresh
    }
}

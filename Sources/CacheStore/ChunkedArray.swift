import CacheSystem

/// An array kept in chunks of `chunkSize` elements, each allocated once at
/// its full size: growing never moves what is stored, and a copy that is
/// then changed copies the chunk changed, not the whole.
///
/// The manifest's rows are one (`StoreState.rows`): as a `[Row]`, replaying
/// 10,000,000 log records (3.3 million rows of 128 bytes) spent 28% of its
/// time growing it, copying each doubled buffer and faulting in fresh pages
/// for it (26% at 1,000,000 records); docs/performance.md, "Start-up".
struct ChunkedArray<Element: Sendable>: RandomAccessCollection, MutableCollection {
    /// Elements per chunk: a power of two (here 4,096: half a MiB of rows).
    static var chunkSize: Int { 1 << shift }
    private static var shift: Int { 12 }
    private static var mask: Int { chunkSize - 1 }

    private var chunks: [[Element]] = []
    private(set) var count = 0

    init() {}

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(i: Int) -> Element {
        get {
            precondition(i >= 0 && i < count, "index \(i) out of range 0..<\(count)")
            return chunks[i >> Self.shift][i & Self.mask]
        }
        _modify {
            precondition(i >= 0 && i < count, "index \(i) out of range 0..<\(count)")
            yield &chunks[i >> Self.shift][i & Self.mask]
        }
    }

    /// Adds `element` at the end; a new chunk is allocated whole when the last is full.
    mutating func append(_ element: Element) {
        if count & Self.mask == 0 { chunks.append(Self.newChunk()) }
        chunks[chunks.count - 1].append(element)
        count += 1
    }

    /// Gives back the pages of the last chunk's room past its elements (a
    /// chunk a `Prefaulter` made has every page faulted in).
    mutating func discardUnusedPages() {
        guard !chunks.isEmpty else { return }
        Memory.discardUnused(&chunks[chunks.count - 1])
    }

    /// The bytes of the last chunk's whole capacity (nil with no chunk),
    /// for a look at which of its pages are resident.
    func withLastChunkCapacity<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R? {
        guard let last = chunks.last else { return nil }
        return last.withUnsafeBufferPointer { body(UnsafeRawBufferPointer(start: $0.baseAddress, count: last.capacity * MemoryLayout<Element>.stride)) }
    }

    private static var prefaulted: Prefaulter.Key<Element> { Prefaulter.Key(purpose: 2, capacity: chunkSize) }

    /// An empty chunk: during a replay (`Prefaulter.current`) the one made
    /// ahead, and the next asked for.
    private static func newChunk() -> [Element] {
        if let prefaulter = Prefaulter.current {
            defer { prefaulter.prepare(prefaulted) }
            if let made = prefaulter.take(prefaulted) { return made }
        }
        var chunk: [Element] = []
        chunk.reserveCapacity(chunkSize)
        return chunk
    }

    /// Removes the last `k` elements (0 through `count`); emptied chunks are freed.
    mutating func removeLast(_ k: Int) {
        precondition(k >= 0 && k <= count, "cannot remove \(k) of \(count) elements")
        var left = k
        while left > 0 {
            let last = chunks[chunks.count - 1].count
            if left >= last {
                chunks.removeLast()
                left -= last
            } else {
                chunks[chunks.count - 1].removeLast(left)
                left = 0
            }
        }
        count -= k
    }

    /// Removes every element and frees every chunk.
    mutating func removeAll() {
        chunks = []
        count = 0
    }
}

extension ChunkedArray: Equatable where Element: Equatable {
    static func == (a: ChunkedArray, b: ChunkedArray) -> Bool { a.count == b.count && a.elementsEqual(b) }
}

extension ChunkedArray: Sendable {}

extension ChunkedArray: ExpressibleByArrayLiteral {
    init(arrayLiteral elements: Element...) {
        self.init()
        for e in elements { append(e) }
    }
}

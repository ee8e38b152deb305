/// Splits a byte stream into `\n`-terminated lines, refusing lines past a limit.
public struct LineBuffer: Sendable {
    private var storage: [UInt8] = []
    private var start = 0
    private var scanned = 0
    /// The longest line accepted, without its newline.
    public let limit: Int

    public init(limit: Int = maxRequestLine) {
        self.limit = limit
    }

    /// What a call to `nextLine` found.
    public enum Next: Equatable {
        case line(ArraySlice<UInt8>)
        /// No complete line yet.
        case incomplete
        /// The current line is longer than `limit`.
        case tooLong
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        reclaimConsumed()
        storage.append(contentsOf: bytes)
    }

    /// Makes room for `count` more bytes, for a reader that buffers lines up
    /// to a large `limit` (a client's answer lines): capacity doubles until
    /// doubling would pass half of what a line at the limit needs, then goes
    /// straight there, so a line near the limit is never copied into a
    /// buffer twice its size (peak memory about the limit, not twice it).
    public mutating func makeRoom(for count: Int) {
        reclaimConsumed()
        let needed = storage.count + count
        guard needed > storage.capacity else { return }
        let ceiling = start + limit + count + 1
        let doubled = 2 * storage.capacity
        storage.reserveCapacity(max(needed, doubled > ceiling / 2 ? ceiling : doubled))
    }

    /// Empties the buffer, keeping its capacity, once every byte in it was taken.
    private mutating func reclaimConsumed() {
        guard start > 0 && start == storage.count else { return }
        storage.removeAll(keepingCapacity: true)
        start = 0
        scanned = 0
    }

    public mutating func append(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { append($0) }
    }

    /// Consumed bytes kept at the front before the buffer is compacted:
    /// one copy per 64 KiB of requests, not one per line.
    static let compactAfter = 65536

    /// The next complete line (without `\n`, and without a trailing `\r`).
    public mutating func nextLine() -> Next {
        var i = max(scanned, start)
        while i < storage.count {
            if storage[i] == 0x0A {
                var end = i
                if end > start && storage[end - 1] == 0x0D { end -= 1 }
                let line = storage[start..<end]
                start = i + 1
                scanned = start
                if line.count > limit { return .tooLong }
                if start > LineBuffer.compactAfter && start * 2 > storage.count {
                    storage.removeFirst(start)
                    start = 0
                    scanned = 0
                }
                return .line(line)
            }
            i += 1
        }
        scanned = i
        // A `\r` at the end may belong to the line ending still to come: it
        // does not count against the limit until the `\n` says it does.
        let pending = storage.count - start - (storage.last == 0x0D ? 1 : 0)
        return pending > limit ? .tooLong : .incomplete
    }

    /// Takes up to `n` raw bytes already buffered (after a `read` header line).
    public mutating func takeBytes(upTo n: Int) -> ArraySlice<UInt8> {
        let end = min(storage.count, start + n)
        let out = storage[start..<end]
        start = end
        scanned = end
        return out
    }
}

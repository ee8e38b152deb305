/// A connection's unread input: appended to by the loop, consumed from the
/// front as request heads and bodies are taken.
public struct HTTPInput: Sendable {
    private var storage: [UInt8] = []
    private var start = 0

    public init() {}

    public var count: Int { storage.count - start }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start == storage.count {
            storage.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 65536 && start * 2 > storage.count {
            storage.removeFirst(start)
            start = 0
        }
        storage.append(contentsOf: bytes)
    }

    /// Calls `body` with the unread bytes.
    public func withUnread<T>(_ body: (UnsafeRawBufferPointer) -> T) -> T {
        storage.withUnsafeBytes { body(UnsafeRawBufferPointer(rebasing: $0[start...])) }
    }

    /// Drops up to `n` bytes from the front; returns how many were dropped.
    @discardableResult
    public mutating func consume(_ n: Int) -> Int {
        let taken = min(n, count)
        start += taken
        return taken
    }
}

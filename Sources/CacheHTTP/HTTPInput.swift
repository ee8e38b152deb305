/// A connection's unread input: appended to by the loop, consumed from the
/// front as request heads and bodies are taken.
public struct HTTPInput: Sendable {
    private var storage: [UInt8] = []
    private var start = 0
    /// Unread bytes already searched for the end of a head, and whether a
    /// line feed was among them: a head dripping in a byte at a time is
    /// searched once in all, not once per read.
    private var scanned = 0
    private var sawLineFeed = false

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
        scanned = 0
        sawLineFeed = false
        return taken
    }

    /// True when parsing the unread bytes can tell more than "incomplete":
    /// they hold an empty line (the end of a head, or empty lines before
    /// one), or are already past a limit `HTTPParser` refuses. Only the
    /// bytes that arrived since the last call are searched.
    public mutating func mayHoldHead(_ limits: HTTPLimits) -> Bool {
        let found: Bool = storage.withUnsafeBytes { raw in
            let b = UnsafeRawBufferPointer(rebasing: raw[start...])
            var i = scanned
            while i < b.count {
                if b[i] == 0x0A {
                    sawLineFeed = true
                    if i == 0 || b[i - 1] == 0x0A || (b[i - 1] == 0x0D && (i == 1 || b[i - 2] == 0x0A)) {
                        scanned = i + 1
                        return true
                    }
                }
                i += 1
            }
            scanned = b.count
            return false
        }
        if found { return true }
        return count > limits.maxHeadBytes || (!sawLineFeed && count > limits.maxRequestLine)
    }
}

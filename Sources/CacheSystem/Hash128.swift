/// An XXH3-128 digest, the name of an object in the store: a value every
/// module passes as it is (the protocol's `read` and `open`, the service,
/// the store), parsed from text once where it comes in. The hashing itself
/// is the store's (`Hash128(of:)`, CacheStore).
///
/// Its text form is xxHash's canonical one, 32 lowercase hex digits with the
/// high 64 bits first, exactly what `xxhsum -H2` prints.
///
/// Frozen, with its small members inlinable: the store decodes one per log
/// record and keys its maps by it, from another module. Without this every
/// decode was an unspecialized generic call (metadata lookups per byte) and
/// a start-up with 200,000 records took 0.4 s instead of 0.12 s.
@frozen
public struct Hash128: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    @inlinable
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    @inlinable
    public static func == (a: Hash128, b: Hash128) -> Bool { a.high == b.high && a.low == b.low }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    /// Parses 32 lowercase hex digits; nil for anything else.
    public init?(hex: some StringProtocol) {
        let utf8 = Array(hex.utf8)
        guard ASCII.isLowercaseHex(utf8, count: 32) else { return nil }
        var words: [UInt64] = [0, 0]
        for (i, c) in utf8.enumerated() {
            let v: UInt8
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): v = c - UInt8(ascii: "a") + 10
            default: return nil
            }
            words[i / 16] = words[i / 16] << 4 | UInt64(v)
        }
        self.init(high: words[0], low: words[1])
    }

    /// The canonical 32-digit lowercase hex form.
    public var hex: String {
        var out = [UInt8](repeating: 0, count: 32)
        let digits = ASCII.lowercaseHexDigits
        for i in 0..<16 {
            out[15 - i] = digits[Int((high >> (UInt64(i) * 4)) & 0xf)]
            out[31 - i] = digits[Int((low >> (UInt64(i) * 4)) & 0xf)]
        }
        return String(decoding: out, as: UTF8.self)
    }

    public var description: String { hex }

    /// The 16 canonical (big-endian) bytes.
    public var bytes: [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: high >> (56 - 8 * UInt64($0))) } +
        (0..<8).map { UInt8(truncatingIfNeeded: low >> (56 - 8 * UInt64($0))) }
    }

    /// The hash whose canonical bytes are the first 16 of `b` (missing ones are 0).
    @inlinable
    public init(bytes b: some Collection<UInt8>) {
        var h: UInt64 = 0, l: UInt64 = 0, i = 0
        for byte in b.prefix(16) {
            if i < 8 { h = h << 8 | UInt64(byte) } else { l = l << 8 | UInt64(byte) }
            i += 1
        }
        self.init(high: h, low: l)
    }

    @inlinable
    public static func < (a: Hash128, b: Hash128) -> Bool { a.high != b.high ? a.high < b.high : a.low < b.low }
}

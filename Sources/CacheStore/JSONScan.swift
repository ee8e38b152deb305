#if canImport(Glibc)
import Glibc
#endif

/// A forward scan of JSON that the daemon parsed before (a stored post):
/// it finds an object's members and skips values without building
/// anything, and says nothing (nil) of bytes that are not JSON. A repeated
/// member counts as its last, as the parser reads it; an escaped key is
/// decoded before it is compared.
struct JSONScan {
    let bytes: UnsafeRawBufferPointer

    /// The title's string, with its quotes (`PostTitle`'s rules).
    func titleSpan() -> Range<Int>? {
        let top = skipSpace(0)
        guard let m = members(of: top, Self.titleKeys) else { return nil }
        if let t = m[0] {
            if isString(t) { return t }
            if bytes[t.lowerBound] == UInt8(ascii: "{"), let r = members(of: t.lowerBound, [Self.rendered])?[0], isString(r) { return r }
            return nil
        }
        if let n = m[1], isString(n) { return n }
        if let r = m[2], bytes[r.lowerBound] == UInt8(ascii: "{"), let t = members(of: r.lowerBound, [Self.text])?[0], isString(t) { return t }
        if let t = m[3], isString(t) { return t }
        return nil
    }

    private static let text = Array("text".utf8)
    private static let rendered = Array("rendered".utf8)
    private static let titleKeys = [Array("title".utf8), Array("name".utf8), Array("record".utf8), text]

    private func isString(_ r: Range<Int>) -> Bool { bytes[r.lowerBound] == UInt8(ascii: "\"") }

    private func skipSpace(_ i: Int) -> Int {
        var j = i
        while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 || bytes[j] == 0x0A || bytes[j] == 0x0D { j += 1 }
        return j
    }

    /// The end (past the closing quote) of the string at `i`: the next
    /// quote found by `memchr` that an even run of backslashes precedes.
    private func stringEnd(_ i: Int) -> Int? {
        guard let base = bytes.baseAddress else { return nil }
        var j = i + 1
        while j < bytes.count {
            guard let hit = memchr(base + j, 0x22, bytes.count - j) else { return nil }
            let q = base.distance(to: UnsafeRawPointer(hit))
            var slashes = 0
            while q - 1 - slashes > i, bytes[q - 1 - slashes] == UInt8(ascii: "\\") { slashes += 1 }
            if slashes % 2 == 0 { return q + 1 }
            j = q + 1
        }
        return nil
    }

    /// The end of the value at `i`.
    private func valueEnd(_ i: Int) -> Int? {
        guard i < bytes.count else { return nil }
        switch bytes[i] {
        case UInt8(ascii: "\""): return stringEnd(i)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var j = i
            while j < bytes.count {
                switch bytes[j] {
                case UInt8(ascii: "\""):
                    guard let e = stringEnd(j) else { return nil }
                    j = e
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return j + 1 }
                default: break
                }
                j += 1
            }
            return nil
        default:
            var j = i
            while j < bytes.count {
                let c = bytes[j]
                if c == UInt8(ascii: ",") || c == UInt8(ascii: "}") || c == UInt8(ascii: "]") || c <= 0x20 { break }
                j += 1
            }
            return j > i ? j : nil
        }
    }

    /// The last value of each of `keys` among the members of the object at `i`.
    private func members(of i: Int, _ keys: [[UInt8]]) -> [Range<Int>?]? {
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        var found = [Range<Int>?](repeating: nil, count: keys.count)
        var j = skipSpace(i + 1)
        if j < bytes.count, bytes[j] == UInt8(ascii: "}") { return found }
        while j < bytes.count {
            guard bytes[j] == UInt8(ascii: "\""), let keyEnd = stringEnd(j) else { return nil }
            var v = skipSpace(keyEnd)
            guard v < bytes.count, bytes[v] == UInt8(ascii: ":") else { return nil }
            v = skipSpace(v + 1)
            guard let valueEnd = valueEnd(v) else { return nil }
            if let k = key(j..<keyEnd, among: keys) { found[k] = v..<valueEnd }
            j = skipSpace(valueEnd)
            guard j < bytes.count else { return nil }
            if bytes[j] == UInt8(ascii: "}") { return found }
            guard bytes[j] == UInt8(ascii: ",") else { return nil }
            j = skipSpace(j + 1)
        }
        return nil
    }

    /// Which of `keys` the key string at `r` (with its quotes) is.
    private func key(_ r: Range<Int>, among keys: [[UInt8]]) -> Int? {
        let raw = UnsafeRawBufferPointer(rebasing: bytes[r.lowerBound + 1..<r.upperBound - 1])
        if !raw.contains(UInt8(ascii: "\\")) { return keys.firstIndex { $0.elementsEqual(raw) } }
        guard let decoded = Self.decodeString(UnsafeRawBufferPointer(rebasing: bytes[r])) else { return nil }
        return keys.firstIndex { $0.elementsEqual(decoded.utf8) }
    }

    /// The text of a JSON string literal (with its quotes), or nil when it is not one.
    static func decodeString(_ literal: UnsafeRawBufferPointer) -> String? {
        guard literal.count >= 2, literal.first == UInt8(ascii: "\""), literal.last == UInt8(ascii: "\"") else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(literal.count)
        var i = 1
        let end = literal.count - 1
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= end else { return nil }
            var v: UInt32 = 0
            for k in at..<at + 4 {
                guard let d = Self.hexValue(literal[k]) else { return nil }
                v = v << 4 | d
            }
            return v
        }
        while i < end {
            let c = literal[i]
            guard c == UInt8(ascii: "\\") else { out.append(c); i += 1; continue }
            guard i + 1 < end else { return nil }
            let e = literal[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard var scalar = hex4(i) else { return nil }
                i += 4
                if (0xD800..<0xDC00).contains(scalar), i + 6 <= end, literal[i] == UInt8(ascii: "\\"), literal[i + 1] == UInt8(ascii: "u"),
                   let low = hex4(i + 2), (0xDC00..<0xE000).contains(low) {
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    i += 6
                }
                // A lone surrogate is no text (the parser refuses it).
                guard let u = Unicode.Scalar(scalar) else { return nil }
                out.append(contentsOf: String(Character(u)).utf8)
            default: return nil
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(c - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(c - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}

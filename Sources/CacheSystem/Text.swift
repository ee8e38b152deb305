#if canImport(Glibc)
import Glibc
#endif

/// The process environment, read from `environ` (no Foundation).
public enum Environment {
    public static func current() -> [String: String] {
        var out: [String: String] = [:]
        var p = environ
        while let entry = p.pointee {
            let s = String(cString: entry)
            if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
            p += 1
        }
        return out
    }
}

extension StringProtocol {
    /// The text cut to its first `bytes` bytes of UTF-8 (at a character
    /// boundary), with a marker saying how much was cut: for values quoted
    /// into errors, warnings and the log, which a hostile origin may make
    /// megabytes long.
    public func cut(toBytes bytes: Int = 200) -> String {
        let utf8 = String(self).utf8
        guard utf8.count > bytes else { return String(self) }
        var end = utf8.index(utf8.startIndex, offsetBy: bytes)
        while end > utf8.startIndex, UTF8.isContinuation(utf8[end]) { end = utf8.index(before: end) }
        let kept = String(String(self).utf8[..<end]) ?? ""
        return kept + "... (\(utf8.count - kept.utf8.count) more bytes)"
    }

    /// A URL as shown to people (a table, the log): a password in its
    /// userinfo (`http://user:secret@host/`) reads `***`, so a manifest row
    /// with credentials does not print them. Anything else, URL or not, is
    /// unchanged.
    public var hidingURLPassword: String {
        let s = String(self)
        let chars = Array(s)
        var start = 0
        while start + 2 < chars.count, !(chars[start] == ":" && chars[start + 1] == "/" && chars[start + 2] == "/") { start += 1 }
        guard start + 2 < chars.count else { return s }
        var end = start + 3
        while end < chars.count, chars[end] != "/", chars[end] != "?", chars[end] != "#" { end += 1 }
        let authority = chars[(start + 3)..<end]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return s }
        return String(chars[...colon]) + "***" + String(chars[at...])
    }

    /// Without leading and trailing spaces, tabs, CR and LF.
    ///
    /// Works on the UTF-8 bytes: in Swift `"\r\n"` is one `Character`, which a
    /// comparison with `"\r"` or `"\n"` never matches.
    public func trimmed() -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0D || $0 == 0x0A }
        let bytes = String(self).utf8
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }

    /// The lines of the text, split at LF with a CR before it removed, so
    /// CRLF and LF files read alike (the last line may lack its ending).
    public func lines() -> [String] {
        var out: [String] = []
        var line: [UInt8] = []
        for b in utf8 {
            if b == 0x0A {
                if line.last == 0x0D { line.removeLast() }
                out.append(String(decoding: line, as: UTF8.self))
                line.removeAll(keepingCapacity: true)
            } else {
                line.append(b)
            }
        }
        if line.last == 0x0D { line.removeLast() }
        out.append(String(decoding: line, as: UTF8.self))
        return out
    }
}

/// Numbers as text without Foundation's `String(format:)`.
public enum NumberText {
    /// `value` with exactly `decimals` digits (0-20) after the point,
    /// exactly as C's `%.Nf` writes it: the exact binary value rounded
    /// (`0.125` is `0.12`, `0.15` is `0.1`), whatever its size (no overflow),
    /// `nan` and `inf` as words, and no sign on a zero (`-0.04` to one
    /// decimal is `0.0`). cachectl and the daemon print every fixed decimal
    /// through this one function.
    public static func fixed(_ value: Double, _ decimals: Int) -> String {
        // 309 digits before the point at most (DBL_MAX), a sign, a point, 20 after.
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 340) { buffer in
            _ = withVaList([Int32(min(max(decimals, 0), 20)), value]) { vsnprintf(buffer.baseAddress, buffer.count, "%.*f", $0) }
            let text = String(cString: buffer.baseAddress!)
            let isZero = text.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "0") || $0 == UInt8(ascii: ".") }
            return isZero && text.hasPrefix("-") ? String(text.dropFirst()) : text
        }
    }

    /// `value` with its digits in groups of three (`412,000`, `-1,000,000`):
    /// counts in log lines that a reader compares at a glance.
    public static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = value < 0 ? "-" : ""
        for (i, c) in digits.enumerated() {
            if i > 0 && (digits.count - i) % 3 == 0 { out.append(",") }
            out.append(c)
        }
        return out
    }

    /// `value` padded with zeros to `width` digits.
    public static func padded(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

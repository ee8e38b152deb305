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
    /// Without leading and trailing spaces, tabs, CR and LF.
    public func trimmed() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}

/// Numbers as text without Foundation's `String(format:)`.
public enum NumberText {
    /// `value` with exactly `decimals` digits after the point.
    public static func fixed(_ value: Double, _ decimals: Int) -> String {
        var scale = 1.0
        for _ in 0..<decimals { scale *= 10 }
        let negative = value < 0
        let scaled = Int64((abs(value) * scale).rounded())
        let whole = scaled / Int64(scale)
        var text = "\(whole)"
        if decimals > 0 {
            let frac = String(scaled % Int64(scale))
            text += "." + String(repeating: "0", count: decimals - frac.count) + frac
        }
        return negative && scaled != 0 ? "-" + text : text
    }

    /// `value` padded with zeros to `width` digits.
    public static func padded(_ value: Int, _ width: Int) -> String {
        let s = String(value)
        return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
    }
}

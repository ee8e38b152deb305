import CacheSystem

/// What a `Range` header asks of a representation of `size` bytes
/// (RFC 9110, 14.2): single byte ranges only. A header that cannot be
/// parsed, another unit, or several ranges is ignored (the whole is sent),
/// as the RFC allows; a range that starts past the end is unsatisfiable.
/// Numbers of any length are read, saturating at `Int64.max`.
public enum HTTPRange: Sendable, Equatable {
    case whole
    /// `length` bytes from `start`.
    case part(start: Int64, length: Int64)
    case unsatisfiable

    public static func resolve(_ header: String?, size: Int64) -> HTTPRange {
        guard let header else { return .whole }
        let h = header.utf8
        guard h.count > 6, String(header.prefix(6)).lowercased() == "bytes=" else { return .whole }
        let spec = header.dropFirst(6).trimmingSpaces
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .whole }
        let first = spec[..<dash], last = spec[spec.index(after: dash)...]
        if first.isEmpty {
            // The last `n` bytes.
            guard let n = number(last) else { return .whole }
            guard n > 0, size > 0 else { return .unsatisfiable }
            let length = min(n, size)
            return .part(start: size - length, length: length)
        }
        guard let start = number(first) else { return .whole }
        var end = size - 1
        if !last.isEmpty {
            guard let e = number(last), e >= start else { return .whole }
            end = min(e, size - 1)
        }
        guard start < size else { return .unsatisfiable }
        return .part(start: start, length: end - start + 1)
    }

    /// Decimal digits, any number of them; a value past `Int64.max`
    /// saturates there (it is past the end of any representation).
    static func number(_ s: Substring) -> Int64? {
        guard !s.isEmpty else { return nil }
        var value: Int64 = 0
        for b in s.utf8 {
            guard ASCII.isDigit(b) else { return nil }
            let (times, o1) = value.multipliedReportingOverflow(by: 10)
            let (sum, o2) = times.addingReportingOverflow(Int64(b - 0x30))
            value = o1 || o2 ? .max : sum
        }
        return value
    }
}

/// Conditional requests on an entity tag (RFC 9110, 13.1).
public enum HTTPConditional {
    /// True when `If-None-Match` matches `etag` (`"..."`, quotes included):
    /// the answer is 304. Weak comparison, as the RFC asks for this header.
    public static func noneMatch(_ header: String?, etag: String) -> Bool {
        guard let header else { return false }
        for item in header.split(separator: ",") {
            var tag = item.trimmingSpaces
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
            if tag == etag[...] { return true }
        }
        return false
    }

    /// True when a `Range` may be honoured: no `If-Range`, or one equal to
    /// `etag` (strong comparison; a date never matches, the front-end sends none).
    public static func rangeApplies(ifRange: String?, etag: String) -> Bool {
        guard let ifRange else { return true }
        return ifRange[...].trimmingSpaces == etag[...]
    }
}

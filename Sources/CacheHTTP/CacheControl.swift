import CacheSystem

/// The `Cache-Control` field (RFC 9111 section 5.2) as a recipient reads
/// it: directives by name. What they mean for a stored image is decided
/// elsewhere (CacheService's `FreshnessHeaders`).
public enum CacheControl {
    /// The directives of `value`, names lowercased, values unquoted ("" for
    /// none). The first of a repeated directive counts; an item without a
    /// name (`=` alone, `=x`) is skipped.
    public static func directives(_ value: String) -> [String: String] {
        var out: [String: String] = [:]
        for part in value.split(separator: ",") {
            let item = part.trimmingSpaces
            guard !item.isEmpty else { continue }
            // `=` alone, or `=x`, names no directive: skipped (it used to trap).
            let pieces = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pieces[0].trimmingSpaces.lowercased()
            guard !name.isEmpty else { continue }
            var v = pieces.count > 1 ? String(pieces[1].trimmingSpaces) : ""
            if v.count >= 2, v.hasPrefix("\""), v.hasSuffix("\"") { v = String(v.dropFirst().dropLast()) }
            if out[name] == nil { out[name] = v }
        }
        return out
    }

    /// A `delta-seconds` value (section 1.2.2): digits only, nil otherwise;
    /// one too large for an `Int64` is clamped to 2^31 - 1.
    public static func deltaSeconds(_ s: String) -> Int64? {
        guard !s.isEmpty, s.utf8.allSatisfy(ASCII.isDigit) else { return nil }
        return Int64(s) ?? Int64(Int32.max)
    }
}

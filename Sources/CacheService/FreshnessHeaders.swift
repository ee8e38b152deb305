import CacheStore
import CacheSystem

/// What an image response's headers say of its freshness (RFC 9111
/// section 4.2.1, as a private cache reads them): the one place where it is
/// decided (docs/architecture.md, "Image freshness").
///
/// Precedence: `no-cache` or `no-store` (stale at once), then `immutable`
/// (never stale), then `max-age` (minus `Age`), then `Expires` (minus `Date`,
/// or the time received when there is none; an `Expires` that is not a date
/// is in the past). With none of them the lifetime is unstated and
/// `images-revalidate-after` applies. `s-maxage` is for shared caches and
/// ignored; so are `private`, `public` and `must-revalidate` (a stale row is
/// always revalidated before a prefetch counts it cached).
enum FreshnessHeaders {
    /// The freshness of a 200 received at `now` (ms since the epoch).
    static func freshness(_ headers: [String: String], now: Int64) -> ImageFreshness {
        ImageFreshness(validators: validators(headers), fetched: now, lifetime: lifetime(headers))
    }

    /// The freshness after a 304 received at `now`: the 304's validators
    /// and lifetime where it sends them, the stored ones where it does not
    /// (RFC 9111 section 4.3.4).
    static func refreshed(_ old: ImageFreshness?, by headers: [String: String], now: Int64) -> ImageFreshness {
        let sent = validators(headers)
        let kept = old?.validators ?? Validators()
        let validators = Validators(etag: sent.etag ?? kept.etag, lastModified: sent.lastModified ?? kept.lastModified)
        var lifetime = lifetime(headers)
        if lifetime == .unstated, headers["cache-control"] == nil, headers["expires"] == nil, let old { lifetime = old.lifetime }
        return ImageFreshness(validators: validators, fetched: now, lifetime: lifetime)
    }

    /// `ETag` and `Last-Modified`, when they are safe to send back in a header.
    static func validators(_ headers: [String: String]) -> Validators {
        Validators(etag: headers["etag"], lastModified: headers["last-modified"]).sanitized
    }

    /// The lifetime the headers state.
    static func lifetime(_ headers: [String: String]) -> ImageFreshness.Lifetime {
        let directives = cacheControl(headers["cache-control"] ?? "")
        if directives["no-cache"] != nil || directives["no-store"] != nil { return .noCache }
        if directives["immutable"] != nil { return .immutable }
        if let value = directives["max-age"] {
            guard let maxAge = deltaSeconds(value) else { return .noCache }  // a malformed max-age: stale (RFC 9111 4.2.1)
            let age = headers["age"].flatMap(deltaSeconds) ?? 0
            let left = maxAge - min(age, maxAge)
            return left == 0 ? .noCache : .seconds(left)
        }
        if let expires = headers["expires"] {
            guard let at = HTTPDate.seconds(expires) else { return .noCache }
            let base = headers["date"].flatMap(HTTPDate.seconds)
            guard let base else { return .expires(at) }
            return at > base ? .seconds(at - base) : .noCache
        }
        return .unstated
    }

    /// Cache-Control's directives, names lowercased, values unquoted ("" for none).
    static func cacheControl(_ value: String) -> [String: String] {
        var out: [String: String] = [:]
        for part in value.split(separator: ",") {
            let item = part.trimmingSpaces()
            guard !item.isEmpty else { continue }
            // `=` alone, or `=x`, names no directive: skipped (it used to trap).
            let pieces = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = pieces[0].trimmingSpaces().lowercased()
            guard !name.isEmpty else { continue }
            var v = pieces.count > 1 ? pieces[1].trimmingSpaces() : ""
            if v.count >= 2, v.hasPrefix("\""), v.hasSuffix("\"") { v = String(v.dropFirst().dropLast()) }
            if out[name] == nil { out[name] = v }  // the first of a repeated directive counts
        }
        return out
    }

    /// A `delta-seconds` value: digits only; huge ones are clamped (RFC 9111 1.2.2).
    static func deltaSeconds(_ s: String) -> Int64? {
        guard !s.isEmpty, s.utf8.allSatisfy(ASCII.isDigit) else { return nil }
        return Int64(s) ?? Int64(Int32.max)
    }
}

extension ImageFreshness.Lifetime {
    /// An `Expires` with no `Date` to measure it from: `at` (unix seconds)
    /// less the time received, decided when the freshness is built.
    fileprivate static func expires(_ at: Int64) -> ImageFreshness.Lifetime {
        let now = Clock.wallMilliseconds() / 1000
        return at > now ? .seconds(at - now) : .noCache
    }
}

extension Substring {
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }
}

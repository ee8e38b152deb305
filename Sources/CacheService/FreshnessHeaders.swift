import CacheHTTP
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
        let directives = CacheControl.directives(headers["cache-control"] ?? "")
        if directives["no-cache"] != nil || directives["no-store"] != nil { return .noCache }
        if directives["immutable"] != nil { return .immutable }
        if let value = directives["max-age"] {
            guard let maxAge = CacheControl.deltaSeconds(value) else { return .noCache }  // a malformed max-age: stale (RFC 9111 4.2.1)
            let age = headers["age"].flatMap(CacheControl.deltaSeconds) ?? 0
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
}

extension ImageFreshness.Lifetime {
    /// An `Expires` with no `Date` to measure it from: `at` (unix seconds)
    /// less the time received, decided when the freshness is built.
    fileprivate static func expires(_ at: Int64) -> ImageFreshness.Lifetime {
        let now = Clock.wallMilliseconds() / 1000
        return at > now ? .seconds(at - now) : .noCache
    }
}

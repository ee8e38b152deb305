import Testing
@testable import CacheService
import CacheStore

/// How an image answer's headers decide its freshness (RFC 9111 4.2.1),
/// when a row is stale, and how failing rows back off.
@Suite struct FreshnessTests {
    static func lifetime(_ headers: [String: String]) -> ImageFreshness.Lifetime { FreshnessHeaders.lifetime(headers) }

    @Test func cacheControlDirectives() {
        #expect(Self.lifetime([:]) == .unstated)
        #expect(Self.lifetime(["cache-control": "max-age=3600"]) == .seconds(3600))
        #expect(Self.lifetime(["cache-control": "public, MAX-AGE=\"60\", must-revalidate"]) == .seconds(60))
        #expect(Self.lifetime(["cache-control": "max-age=0"]) == .noCache)
        #expect(Self.lifetime(["cache-control": "max-age=ten"]) == .noCache, "a malformed max-age is stale")
        #expect(Self.lifetime(["cache-control": "max-age=99999999999999999999"]) == .seconds(Int64(Int32.max)))
        #expect(Self.lifetime(["cache-control": "no-cache"]) == .noCache)
        #expect(Self.lifetime(["cache-control": "max-age=3600, no-cache=\"set-cookie\""]) == .noCache)
        #expect(Self.lifetime(["cache-control": "no-store"]) == .noCache)
        #expect(Self.lifetime(["cache-control": "public, max-age=31536000, immutable"]) == .immutable)
        #expect(Self.lifetime(["cache-control": "s-maxage=100"]) == .unstated, "s-maxage is for shared caches")
        #expect(Self.lifetime(["cache-control": "max-age=100", "age": "40"]) == .seconds(60))
        #expect(Self.lifetime(["cache-control": "max-age=100", "age": "400"]) == .noCache)
        #expect(Self.lifetime(["cache-control": "max-age=10", "expires": "Thu, 01 Jan 1970 00:00:01 GMT"]) == .seconds(10),
                "max-age wins over Expires")
        // Any origin may send these; a directive without a name is skipped (`=` alone trapped).
        for odd in ["=", ",=,", " = ", "=5", "max-age=60, =, no"] { _ = Self.lifetime(["cache-control": odd]) }
        #expect(Self.lifetime(["cache-control": "=, max-age=60"]) == .seconds(60))
        // Two Cache-Control lines arrive joined (HTTPTransfer's list fields): no-store on either counts.
        #expect(Self.lifetime(["cache-control": "no-store, max-age=31536000"]) == .noCache)
    }

    @Test func expiresIsMeasuredFromDate() {
        let date = "Tue, 01 Dec 2026 12:00:00 GMT"
        #expect(Self.lifetime(["expires": "Tue, 01 Dec 2026 13:00:00 GMT", "date": date]) == .seconds(3600))
        #expect(Self.lifetime(["expires": "Thu, 01 Jan 1970 00:00:01 GMT", "date": date]) == .noCache)  // nginx's `expires epoch`
        #expect(Self.lifetime(["expires": "0", "date": date]) == .noCache, "an invalid Expires is in the past")
        #expect(Self.lifetime(["expires": "Tue, 01 Dec 2026 12:00:00 GMT", "date": date]) == .noCache)
        // With no Date, from the time received: far ahead is fresh, long past is stale.
        guard case .seconds(let s) = Self.lifetime(["expires": "Fri, 01 Jan 2100 00:00:00 GMT"]) else { Issue.record("not fresh"); return }
        #expect(s > 365 * 86400)
    }

    @Test func staleness() {
        let fetched: Int64 = 1_000_000
        func stale(_ l: ImageFreshness.Lifetime, at now: Int64, after: Duration = .seconds(86400)) -> Bool {
            ImageFreshness(fetched: fetched, lifetime: l).isStale(now: now, revalidateAfter: after)
        }
        #expect(!stale(.seconds(60), at: fetched + 59_999) && stale(.seconds(60), at: fetched + 60_000))
        #expect(stale(.noCache, at: fetched))
        #expect(!stale(.immutable, at: .max))
        #expect(!stale(.unstated, at: fetched + 86_399_999) && stale(.unstated, at: fetched + 86_400_000))
        #expect(!stale(.unstated, at: .max, after: .zero), "images-revalidate-after 0: never")
        #expect(stale(.unstated, at: fetched + 500, after: .milliseconds(500)), "a fraction of a second is not never")
        #expect(!stale(.unstated, at: .max, after: .seconds(-1)))
        #expect(!stale(.seconds(.max), at: .max - 1), "no overflow")
    }

    /// A 304 keeps the stored validators and lifetime it does not restate.
    @Test func aNotModifiedRefreshesWhatItSends() {
        let old = ImageFreshness(validators: Validators(etag: "\"a\"", lastModified: "Tue, 01 Dec 2026 06:00:00 GMT"), fetched: 1, lifetime: .seconds(60))
        let kept = FreshnessHeaders.refreshed(old, by: [:], now: 500)
        #expect(kept == ImageFreshness(validators: old.validators, fetched: 500, lifetime: .seconds(60)))
        let changed = FreshnessHeaders.refreshed(old, by: ["etag": "\"b\"", "cache-control": "max-age=5"], now: 500)
        #expect(changed.validators.etag == "\"b\"" && changed.validators.lastModified == old.validators.lastModified
                && changed.lifetime == .seconds(5))
    }

    @Test func backoffDoublesFromTheSecondFailureToADay() {
        #expect(RowFailures.backoff(consecutive: 1) == .zero)
        #expect(RowFailures.backoff(consecutive: 2) == .seconds(120))
        #expect(RowFailures.backoff(consecutive: 3) == .seconds(240))
        #expect(RowFailures.backoff(consecutive: 11) == .seconds(61_440))
        #expect(RowFailures.backoff(consecutive: 12) == .seconds(86_400))
        #expect(RowFailures.backoff(consecutive: 1000) == .seconds(86_400))
        var f = RowFailures()
        f.failed("u", RowError(time: 100, reason: "HTTP 404", status: 404))
        #expect(!f.inBackoff("u", now: 100))
        f.failed("u", RowError(time: 200, reason: "HTTP 404", status: 404))
        #expect(f.inBackoff("u", now: 319) && !f.inBackoff("u", now: 320))
        #expect(f.lastError("u")?.time == 200)
        f.keep(only: ["v"])
        #expect(f.lastError("u") == nil)
        f.failed("v", RowError(time: 1, reason: "x"))
        f.succeeded("v")
        #expect(f.lastError("v") == nil && !f.inBackoff("v", now: 1))
    }
}

#if canImport(Glibc)
import Glibc
#endif
import CacheStore
import CacheSystem
import CacheVariant

/// Variants that could not be made, remembered so that asking again does
/// not decode the same hostile image again (docs/operations.md, "Image
/// variants"), in memory only.
///
/// A failure that is the original's (`VariantFailure.isTheOriginals`: it was
/// refused, or a helper failed on it) is remembered for the original: every
/// variant of it fails at once. Other failures are remembered for the
/// variant alone. A refusal stands while the variant settings are the same
/// (a reload forgets every failure); a helper's failure is tried again
/// after the backoff, `variant-retry-after` doubled with each failure of the
/// same original again, at most `maxDoublings` times. An original keeps its
/// record past the backoff, and its jobs are suspect (`VariantJob.suspect`),
/// until one of its variants is made. Bytes that change are a new original
/// (another hash), with no record. At most `limit` records are kept.
struct VariantRefusals: Sendable {
    struct Refusal: Sendable {
        var error: CacheError
        /// Monotonic nanoseconds after which it is tried again; nil: not while the settings stand.
        var until: UInt64?
    }

    /// An original's record: its last failure and how many in a row.
    private struct Record: Sendable {
        var refusal: Refusal
        var failures: Int
    }

    private var byOriginal: [Hash128: Record] = [:]
    private var byKey: [VariantKey: Refusal] = [:]

    /// Records kept at most, of originals and of variants each: past it,
    /// all of that kind are forgotten (each is only a saved decode; an
    /// attacker asking for every size cannot grow this).
    static let limit = 4096
    /// The backoff doubles at most this many times (32 x `variant-retry-after`).
    static let maxDoublings = 5

    /// The remembered failure of `key` (its original's, or its own), when it still stands at `now`.
    func refusal(_ key: VariantKey, now: UInt64) -> CacheError? {
        if let r = byOriginal[key.source]?.refusal, Self.stands(r, now) { return r.error }
        if let r = byKey[key], Self.stands(r, now) { return r.error }
        return nil
    }

    /// Whether `source` has a failure on record, standing or not: its jobs are suspect.
    func failedBefore(_ source: Hash128) -> Bool { byOriginal[source] != nil }

    /// Remembers `failure` of `key` at `now` (wall clock: `wallSeconds`);
    /// returns the error to answer, which says for what and until when.
    mutating func note(_ key: VariantKey, _ failure: VariantFailure, retryAfter: Duration,
                       now: UInt64, wallSeconds: Int64) -> CacheError {
        let original = failure.isTheOriginals
        let failures = original ? (byOriginal[key.source]?.failures ?? 0) + 1 : 1
        let backoff = retryAfter * (1 << min(failures - 1, Self.maxDoublings))
        let until = failure.isRefusal ? nil : Clock.instant(after: backoff, from: now)
        let error = VariantMaker.cacheError(failure.noting(Self.note(original: original, refused: failure.isRefusal,
                                                                     backoff: backoff, wallSeconds: wallSeconds)))
        let refusal = Refusal(error: error, until: until)
        if original {
            if byOriginal.count >= Self.limit { byOriginal = [:] }
            byOriginal[key.source] = Record(refusal: refusal, failures: failures)
        } else {
            if byKey.count >= Self.limit { byKey = [:] }
            byKey[key] = refusal
        }
        return error
    }

    /// A variant of `source` was made: its record goes, and its jobs are no longer suspect.
    mutating func made(_ source: Hash128) { byOriginal[source] = nil }

    /// Forgets everything (the settings changed).
    mutating func removeAll() {
        byOriginal = [:]
        byKey = [:]
    }

    private static func stands(_ r: Refusal, _ now: UInt64) -> Bool {
        guard let until = r.until else { return true }
        return now < until
    }

    /// What a remembered failure adds to its message: for what, and until when.
    static func note(original: Bool, refused: Bool, backoff: Duration, wallSeconds: Int64) -> String {
        let scope = original ? "for this image: every variant of it fails at once" : "for this variant"
        if refused { return "remembered \(scope) while the variant settings stand" }
        let again = utc(wallSeconds + (backoff + .nanoseconds(999_999_999)).wholeSeconds)
        return "remembered \(scope) until \(again)" + (original ? " or until its bytes change" : "")
    }

    /// Seconds since the epoch as RFC 3339 in UTC.
    static func utc(_ seconds: Int64) -> String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func two(_ n: Int32) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}

extension VariantFailure {
    /// The failure with `note` added to its message.
    func noting(_ note: String) -> VariantFailure {
        switch self {
        case .refused(let m): .refused("\(m); \(note)")
        case .notMade(let m): .notMade("\(m); \(note)")
        case .helperFailed(let m): .helperFailed("\(m); \(note)")
        case .source, .unavailable, .busy, .stopped: self
        }
    }
}

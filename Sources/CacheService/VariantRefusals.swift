import CacheStore
import CacheSystem

/// Variants that could not be made, remembered so that asking again does
/// not decode the same hostile image again (docs/operations.md, "Image
/// variants"), in memory only. An image the helper refused stays refused
/// while the variant settings are the same (a reload forgets every
/// refusal); a helper that failed on it (crashed, killed, too slow) is
/// tried again after `retryAfter`. At most `limit` are kept.
struct VariantRefusals: Sendable {
    struct Refusal: Sendable {
        var error: CacheError
        /// Monotonic nanoseconds after which it is tried again; nil: not while the settings stand.
        var until: UInt64?
    }

    private var byKey: [VariantKey: Refusal] = [:]

    /// A failure of a helper is tried again after this long.
    static let retryAfter = Duration.seconds(60)
    /// Refusals kept at most: past it, all are forgotten (each is only a
    /// saved decode; an attacker asking for every size cannot grow this).
    static let limit = 4096

    /// The remembered failure of `key`, when it still stands at `now`.
    func refusal(_ key: VariantKey, now: UInt64) -> CacheError? {
        guard let r = byKey[key] else { return nil }
        if let until = r.until, now >= until { return nil }
        return r.error
    }

    /// Remembers `error` for `key`: for good when the image was refused, for a while otherwise.
    mutating func note(_ key: VariantKey, _ error: CacheError, refused: Bool, now: UInt64) {
        if byKey.count >= Self.limit { byKey = [:] }
        byKey[key] = Refusal(error: error, until: refused ? nil : Clock.instant(after: Self.retryAfter, from: now))
    }

    /// Forgets everything (the settings changed).
    mutating func removeAll() { byKey = [:] }
}

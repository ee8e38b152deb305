/// What the origin said about a row's image when it last answered for it
/// (a 200 or a 304): its validators for a conditional request, and how long
/// the answer stays fresh (RFC 9111). Kept per row, beside the row's object,
/// in `rowFreshness` records (format version 3, docs/storage-format.md).
///
/// The lifetime is kept as the origin stated it, not as a deadline, so the
/// daemon's `images-revalidate-after` (for answers that state none) applies
/// as it is set now, not as it was when the image was fetched.
public struct ImageFreshness: Sendable, Equatable {
    /// How long the answer stays fresh, as the origin stated it.
    public enum Lifetime: Sendable, Equatable {
        /// No `Cache-Control` freshness and no `Expires`: `images-revalidate-after` decides.
        case unstated
        /// Fresh for this many seconds after `fetched` (`max-age`, or `Expires` minus `Date`).
        case seconds(Int64)
        /// `no-cache` (or `max-age=0`, an `Expires` in the past): stale at once.
        case noCache
        /// `immutable`: never stale; only `prefetch --force` fetches it again.
        case immutable
    }

    /// Validators to send as `If-None-Match` and `If-Modified-Since`.
    public var validators: Validators
    /// When the answer was received, milliseconds since the epoch.
    public var fetched: Int64
    public var lifetime: Lifetime

    public init(validators: Validators = Validators(), fetched: Int64, lifetime: Lifetime = .unstated) {
        self.validators = validators
        self.fetched = fetched
        self.lifetime = lifetime
    }

    /// When the answer goes stale (milliseconds since the epoch), nil when
    /// never: `immutable`, or unstated with `revalidateAfter` zero or less.
    public func staleAt(revalidateAfter: Duration) -> Int64? {
        switch lifetime {
        case .immutable: return nil
        case .noCache: return fetched
        case .seconds(let s): return fetched.addingClamped(s.multipliedClamped(1000))
        case .unstated: return revalidateAfter <= .zero ? nil : fetched.addingClamped(revalidateAfter.wholeMilliseconds)
        }
    }

    /// Whether a prefetch at `now` (ms since the epoch) revalidates the row.
    public func isStale(now: Int64, revalidateAfter: Duration) -> Bool {
        guard let at = staleAt(revalidateAfter: revalidateAfter) else { return false }
        return now >= at
    }
}

extension Int64 {
    func addingClamped(_ other: Int64) -> Int64 {
        let (v, overflow) = addingReportingOverflow(other)
        return overflow ? (other > 0 ? .max : .min) : v
    }

    func multipliedClamped(_ other: Int64) -> Int64 {
        let (v, overflow) = multipliedReportingOverflow(by: other)
        return overflow ? ((self < 0) != (other < 0) ? .min : .max) : v
    }
}

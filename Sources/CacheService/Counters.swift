/// The counters reported by `status` (docs/protocol.md, `status`).
public struct CounterValues: Sendable, Equatable {
    public var requests = 0
    public var hits = 0
    public var misses = 0
    public var downloads = 0
    public var downloadBytes: Int64 = 0
    public var coalesced = 0
    /// Error answers, counted by the front-ends (`CacheService.noteRequests`).
    public var errors = 0
    public var connections = 0
    /// Requests to the origin that failed (a transfer, a status, a body that
    /// is not a feed or not an image): never a store failure, and not a row
    /// whose URL cannot be fetched (no request is made for it).
    public var upstreamErrors = 0
    public var quarantined = 0
    /// Read errors met on object files (`Store.readErrors`): each also
    /// quarantined its object.
    public var readErrors = 0
    /// Variants made by a helper and stored.
    public var variantsMade = 0
    /// Variant requests answered from the store, no helper involved.
    public var variantHits = 0
    /// Variant requests that failed: the image refused, a helper failed, none could start.
    public var variantFailures = 0
    /// Variant jobs given to the helpers: each a decode of its original
    /// (unless the daemon stops first). A failure answered from memory gives none.
    public var variantJobs = 0
}

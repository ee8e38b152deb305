import Synchronization

/// A flag that goes up once and stays up: shutdown raises it, and each long
/// pass (the reconciliation of post files, the sweep of missing objects,
/// compaction, gc, eviction's removals, the scrub's and `verify`'s hashing)
/// looks at it between items and returns early (docs/architecture.md,
/// "Background passes"). A look is one atomic load, cheap enough for every
/// item of a pass over a million.
public final class StopFlag: Sendable {
    private let raised = Atomic<Bool>(false)

    public init() {}

    /// Raises the flag; every later `isRaised` is true.
    public func raise() { raised.store(true, ordering: .releasing) }

    /// True once `raise` was called.
    public var isRaised: Bool { raised.load(ordering: .acquiring) }
}

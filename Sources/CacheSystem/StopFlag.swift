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

    /// The flag the work this thread runs now answers to: a feed page's
    /// parse, bound by the refresh that reads it, looks at it every few
    /// thousand items, where it has no flag of its own to be handed.
    @TaskLocal public static var current: StopFlag?

    /// How many items (elements, nodes) a parse reads between two looks
    /// at `current`, unless `bytesBetweenLooks` come first.
    public static let itemsBetweenLooks = 4096
    /// How many bytes a parse reads between two looks at most (a page of
    /// a few items of megabytes each).
    public static let bytesBetweenLooks = 16 << 20
}

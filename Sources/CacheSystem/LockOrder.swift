import CLinux

/// The one order in which locks are taken (docs/architecture.md, "Locks"):
/// a thread that holds a lock may take only a lock of a higher rank. Debug
/// builds check every acquisition and trap on a violation, naming both
/// locks; release builds do not pay for the check.
public enum LockRank: Int32, Sendable, Comparable {
    /// A download's body sink: held while the chunk goes to its temp file
    /// (which names the file, under a leaf lock). Never contended.
    case bodySink = 5
    /// FeedRefresher: a read-modify-write of the posts (a refresh's store, a
    /// `delete_post`), so neither writes over what the other just changed.
    case postsEdit = 8
    /// FeedRefresher: the writer of `feeds.state` (a refresh's, under `postsEdit`
    /// for the posts), so the file never goes back to an older state.
    case feedsState = 9
    /// Store: the writers of `posts/` (a refresh, the start-up reconciliation).
    case postFiles = 10
    /// Store: the index log and everything appended to it.
    case storeWriter = 20
    /// Service: one images prefetch's tally; progress events are posted under it.
    case prefetchTally = 30
    /// Service: the rebuild of the manifest's view of every row, one at a
    /// time (`CacheService.manifestView`); it reads the index inside.
    case manifestView = 35
    /// Store: the in-memory index.
    case storeState = 40
    /// CachedClient: held while a request is written to the shared
    /// connection (the queue of its answers is a leaf lock taken inside).
    case clientWriter = 50
    /// Everything else: nothing may be taken while one of these is held.
    case leaf = 100

    public static func < (a: LockRank, b: LockRank) -> Bool { a.rawValue < b.rawValue }

    #if DEBUG
    /// Notes that this thread takes a lock of this rank; traps when it holds
    /// one of the same or a higher rank already.
    @inline(__always) func acquire() {
        let top = clinux_lock_rank_push(rawValue)
        if top >= rawValue {
            let held = LockRank(rawValue: top).map { "\($0)" } ?? "\(top)"
            preconditionFailure("lock order violated: taking a \(self) lock while holding a \(held) lock (docs/architecture.md, \"Locks\")")
        }
    }

    @inline(__always) func release() { clinux_lock_rank_pop(rawValue) }
    #else
    @inline(__always) func acquire() {}
    @inline(__always) func release() {}
    #endif
}

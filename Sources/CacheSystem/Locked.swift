/// A value behind a lock: the one way state is shared between threads here.
///
/// Built on a pthread mutex rather than `Synchronization.Mutex`, which
/// ThreadSanitizer cannot see (it reports false races), and without
/// Foundation, which the daemon does not link. `rank` places it in the lock
/// order (`LockRank`), checked in debug builds.
public final class Locked<State> {
    private var state: State
    private let mutex = PosixMutex()
    private let rank: LockRank

    public init(_ state: State, rank: LockRank = .leaf) {
        self.state = state
        self.rank = rank
    }

    /// Runs `body` with exclusive access to the state.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        rank.acquire()
        mutex.lock()
        defer {
            mutex.unlock()
            rank.release()
        }
        return try body(&state)
    }
}

// Safe because every access to `state` happens inside `withLock`, under the
// mutex; and only for Sendable state, so what a body copies out may cross
// threads. Non-Sendable state behind a lock does not compile.
extension Locked: @unchecked Sendable where State: Sendable {}

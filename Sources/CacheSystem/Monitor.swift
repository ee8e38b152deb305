/// A value behind a lock with a condition: threads wait for the state to
/// reach something, and an update wakes them to look again.
public final class Monitor<State> {
    private var state: State
    private let mutex = PosixMutex()
    private let condition = PosixCondition()
    private let rank: LockRank

    /// Who an update wakes.
    public enum Wake: Sendable {
        /// Every waiter (each checks its own condition).
        case all
        /// One waiter: for work that one thread takes (a queued job).
        case one
        /// None: a read, or a change no waiter's condition depends on (a
        /// commit queued while the group commit's waiters wait for a result
        /// or for the leader to finish).
        case none
    }

    public init(_ state: State, rank: LockRank = .leaf) {
        self.state = state
        self.rank = rank
    }

    /// Changes the state and wakes waiters, as `wake` says.
    public func update<R>(wake: Wake = .all, _ body: (inout State) -> R) -> R {
        lock()
        defer {
            switch wake {
            case .all: condition.broadcast()
            case .one: condition.signal()
            case .none: break
            }
            unlock()
        }
        return body(&state)
    }

    /// Blocks until `body` returns a value (it is called again after each update).
    public func wait<R>(_ body: (inout State) -> R?) -> R {
        lock()
        defer { unlock() }
        while true {
            if let r = body(&state) { return r }
            condition.wait(mutex)
        }
    }

    /// Like `wait`, but gives up after `span`: nil then.
    public func wait<R>(for span: Duration, _ body: (inout State) -> R?) -> R? {
        let deadline = Clock.instant(after: span)
        lock()
        defer { unlock() }
        while true {
            if let r = body(&state) { return r }
            let now = Clock.monotonicNanoseconds()
            if now >= deadline { return nil }
            _ = condition.wait(mutex, for: .nanoseconds(deadline - now))
        }
    }

    private func lock() { rank.acquire(); mutex.lock() }
    private func unlock() { mutex.unlock(); rank.release() }
}

// Safe for the reason `Locked` is: the state is touched only under the
// mutex, and only Sendable state may be shared.
extension Monitor: @unchecked Sendable where State: Sendable {}

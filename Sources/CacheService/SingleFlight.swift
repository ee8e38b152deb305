import CacheSystem

/// At most one piece of work per key at a time: the first caller runs it,
/// callers that arrive while it runs wait for its result.
final class SingleFlight<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    typealias Waiter = @Sendable (Value) -> Void
    private let flights = Locked<[Key: [Waiter]]>([:])

    /// Adds `waiter` for `key`. Returns true when the caller is the first and
    /// must do the work, then call `finish`; false when it joined a running one.
    func join(_ key: Key, _ waiter: @escaping Waiter) -> Bool {
        flights.withLock { f in
            if f[key] != nil {
                f[key]!.append(waiter)
                return false
            }
            f[key] = [waiter]
            return true
        }
    }

    /// Starts a flight for `key` with no waiter yet: true when none was
    /// running (the caller does the work, then calls `finish`).
    func begin(_ key: Key) -> Bool {
        flights.withLock { f in
            guard f[key] == nil else { return false }
            f[key] = []
            return true
        }
    }

    /// Adds `waiter` for `key` only when a flight for it is running; false
    /// (and `waiter` dropped) when none is.
    func joinIfRunning(_ key: Key, _ waiter: @escaping Waiter) -> Bool {
        flights.withLock { f in
            guard f[key] != nil else { return false }
            f[key]!.append(waiter)
            return true
        }
    }

    /// Ends the flight for `key`, handing `value` to every waiter.
    func finish(_ key: Key, _ value: Value) {
        let waiters = flights.withLock { $0.removeValue(forKey: key) } ?? []
        for w in waiters { w(value) }
    }
}

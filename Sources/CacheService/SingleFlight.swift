import CacheSystem

/// At most one piece of work per key at a time: the first caller runs it,
/// callers that arrive while it runs wait for its result, and (for work
/// that reports as it goes: a prefetch's progress) hear its updates from
/// when they joined.
final class UpdatingFlight<Key: Hashable & Sendable, Update: Sendable, Value: Sendable>: Sendable {
    typealias Waiter = @Sendable (Value) -> Void
    typealias Listener = @Sendable (Update) -> Void

    private struct Flight {
        var waiters: [Waiter] = []
        var listeners: [Listener] = []
    }
    private let flights = Locked<[Key: Flight]>([:])

    /// Adds `waiter` for `key`. Returns true when the caller is the first and
    /// must do the work, then call `finish`; false when it joined a running one.
    func join(_ key: Key, _ waiter: @escaping Waiter) -> Bool {
        join(key, listener: nil, waiter)
    }

    /// `join`, with `listener` told every `update` of the flight from now on.
    func join(_ key: Key, listener: Listener?, _ waiter: @escaping Waiter) -> Bool {
        flights.withLock { f in
            let first = f[key] == nil
            f[key, default: Flight()].waiters.append(waiter)
            if let listener { f[key]!.listeners.append(listener) }
            return first
        }
    }

    /// Starts a flight for `key` with no waiter yet: true when none was
    /// running (the caller does the work, then calls `finish`).
    func begin(_ key: Key) -> Bool {
        flights.withLock { f in
            guard f[key] == nil else { return false }
            f[key] = Flight()
            return true
        }
    }

    /// Adds `waiter` for `key` only when a flight for it is running; false
    /// (and `waiter` dropped) when none is.
    func joinIfRunning(_ key: Key, _ waiter: @escaping Waiter) -> Bool {
        flights.withLock { f in
            guard f[key] != nil else { return false }
            f[key]!.waiters.append(waiter)
            return true
        }
    }

    /// Tells every listener of `key`'s flight (outside the lock, in the order they joined).
    func update(_ key: Key, _ update: Update) {
        for l in flights.withLock({ $0[key]?.listeners ?? [] }) { l(update) }
    }

    /// Ends the flight for `key`, handing `value` to every waiter.
    func finish(_ key: Key, _ value: Value) {
        let waiters = flights.withLock { $0.removeValue(forKey: key)?.waiters } ?? []
        for w in waiters { w(value) }
    }
}

/// A flight whose work reports nothing as it goes.
typealias SingleFlight<Key: Hashable & Sendable, Value: Sendable> = UpdatingFlight<Key, Never, Value>

import Foundation

/// A value behind a lock: the one way state is shared between threads here.
///
/// Built on `NSLock` rather than `Synchronization.Mutex` because
/// ThreadSanitizer cannot see Mutex's futex and reports false races.
public final class Locked<State>: @unchecked Sendable {
    private var state: State
    private let lock = NSLock()

    public init(_ state: State) { self.state = state }

    /// Runs `body` with exclusive access to the state.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        lock.lock()
        defer { lock.unlock() }
        return try body(&state)
    }
}

/// Monotonic and wall clocks.
public enum Clock {
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Milliseconds since the epoch.
    public static func wallMilliseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// Seconds since the epoch.
    public static func wallSeconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec)
    }
}

/// A value behind a lock with a condition: threads wait for the state to
/// reach something, and every update wakes them to look again.
public final class Monitor<State>: @unchecked Sendable {
    private var state: State
    private let condition = NSCondition()

    public init(_ state: State) { self.state = state }

    /// Changes the state and wakes every waiter.
    public func update<R>(_ body: (inout State) -> R) -> R {
        condition.lock()
        defer { condition.broadcast(); condition.unlock() }
        return body(&state)
    }

    /// Blocks until `body` returns a value (it is called again after each update).
    public func wait<R>(_ body: (inout State) -> R?) -> R {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let r = body(&state) { return r }
            condition.wait()
        }
    }
}

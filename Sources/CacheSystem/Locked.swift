/// A value behind a lock: the one way state is shared between threads here.
///
/// Built on a pthread mutex rather than `Synchronization.Mutex`, which
/// ThreadSanitizer cannot see (it reports false races), and without
/// Foundation, which the daemon does not link. `rank` places it in the lock
/// order (`LockRank`), checked in debug builds.
///
/// State must not be a closure, an optional closure or a tuple holding one:
/// `withLock` passes the state `inout` through generic code, and a function
/// value crossing that boundary is rewrapped in reabstraction thunks on
/// every access until calling it overflows the stack. Keep a closure in a
/// `Handler` (a class) instead; debug builds trap on such a state at `init`.
public final class Locked<State> {
    private var storage: Storage
    private let mutex = PosixMutex()
    private let rank: LockRank

    /// The state and a byte: an empty state (`Locked(())`, a lock that
    /// guards no value) has no size, and its exclusive access was then
    /// tracked at the object's own address, which every call reads before
    /// it locks; ThreadSanitizer took the two for a race. With the byte,
    /// the access has a place of its own.
    private struct Storage {
        var state: State
        var byte: UInt8 = 0
    }

    public init(_ state: State, rank: LockRank = .leaf) {
        self.storage = Storage(state: state)
        self.rank = rank
        #if DEBUG
        precondition(!Self.isFunctionShaped(State.self), "Locked<\(State.self)>: keep a closure behind a lock in a Handler (Handler.swift)")
        #endif
    }

    /// True for the state types whose values `withLock` would rewrap on
    /// each access: a function type, an optional one, or a tuple with a
    /// function among its elements (types whose name, less any `Optional<>`,
    /// is parenthesised and has an arrow). Structs, classes, arrays and
    /// dictionaries of closures keep one representation and are fine.
    static func isFunctionShaped(_ type: Any.Type) -> Bool {
        var name = Substring(String(describing: type))
        while name.hasPrefix("Optional<") && name.hasSuffix(">") { name = name.dropFirst(9).dropLast() }
        if name.hasPrefix("@Sendable ") { name = name.dropFirst(10) }
        return name.hasPrefix("(") && name.contains("->")
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
        return try body(&storage.state)
    }
}

// Safe because every access to the state happens inside `withLock`, under the
// mutex; and only for Sendable state, so what a body copies out may cross
// threads. Non-Sendable state behind a lock does not compile.
extension Locked: @unchecked Sendable where State: Sendable {}

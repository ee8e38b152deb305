#if canImport(Glibc)
import Glibc
#endif
import CLinux

/// A pthread mutex with a stable address (a class, never copied).
public final class PosixMutex: @unchecked Sendable {
    let raw: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_mutex_t())
        pthread_mutex_init(raw, nil)
    }

    deinit {
        pthread_mutex_destroy(raw)
        raw.deallocate()
    }

    @inline(__always) public func lock() { pthread_mutex_lock(raw) }
    @inline(__always) public func unlock() { pthread_mutex_unlock(raw) }
}

/// A condition variable bound to a `PosixMutex`.
public final class PosixCondition: @unchecked Sendable {
    private let raw: UnsafeMutablePointer<pthread_cond_t>

    public init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_cond_t())
        pthread_cond_init(raw, nil)
    }

    deinit {
        pthread_cond_destroy(raw)
        raw.deallocate()
    }

    /// Waits (the mutex held) until signalled.
    public func wait(_ mutex: PosixMutex) { pthread_cond_wait(raw, mutex.raw) }

    /// Waits until signalled or `seconds` pass; false on timeout.
    public func wait(_ mutex: PosixMutex, seconds: Double) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let total = Double(now.tv_sec) + Double(now.tv_nsec) / 1e9 + max(0, seconds)
        var deadline = timespec(tv_sec: Int(total), tv_nsec: Int((total - Double(Int(total))) * 1e9))
        return pthread_cond_timedwait(raw, mutex.raw, &deadline) == 0
    }

    public func signal() { pthread_cond_signal(raw) }
    public func broadcast() { pthread_cond_broadcast(raw) }
}

/// A value behind a lock: the one way state is shared between threads here.
///
/// Built on a pthread mutex rather than `Synchronization.Mutex`, which
/// ThreadSanitizer cannot see (it reports false races), and without
/// Foundation, which the daemon does not link.
public final class Locked<State>: @unchecked Sendable {
    private var state: State
    private let mutex = PosixMutex()

    public init(_ state: State) { self.state = state }

    /// Runs `body` with exclusive access to the state.
    @inline(__always)
    public func withLock<R, E: Error>(_ body: (inout State) throws(E) -> R) throws(E) -> R {
        mutex.lock()
        defer { mutex.unlock() }
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
    private let mutex = PosixMutex()
    private let condition = PosixCondition()

    public init(_ state: State) { self.state = state }

    /// Changes the state and wakes every waiter.
    public func update<R>(_ body: (inout State) -> R) -> R {
        mutex.lock()
        defer { condition.broadcast(); mutex.unlock() }
        return body(&state)
    }

    /// Blocks until `body` returns a value (it is called again after each update).
    public func wait<R>(_ body: (inout State) -> R?) -> R {
        mutex.lock()
        defer { mutex.unlock() }
        while true {
            if let r = body(&state) { return r }
            condition.wait(mutex)
        }
    }
}

/// Threads without Foundation.
public enum Threads {
    private final class Box {
        let body: () -> Void
        init(_ body: @escaping () -> Void) { self.body = body }
    }

    /// Starts a detached thread named `name` (at most 15 bytes are kept).
    public static func start(name: String, stackSize: Int = 1 << 20, _ body: @escaping @Sendable () -> Void) {
        var attr = pthread_attr_t()
        pthread_attr_init(&attr)
        pthread_attr_setdetachstate(&attr, Int32(PTHREAD_CREATE_DETACHED))
        pthread_attr_setstacksize(&attr, stackSize)
        let box = Unmanaged.passRetained(Box { 
            setName(name)
            body()
        }).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, &attr, { arg in
            let b = Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue()
            b.body()
            return nil
        }, box)
        pthread_attr_destroy(&attr)
        if rc != 0 {
            // No thread: run nothing, but do not leak the closure.
            Unmanaged<Box>.fromOpaque(box).release()
        }
    }

    private static func setName(_ name: String) {
        clinux_set_thread_name(String(decoding: name.utf8.prefix(15), as: UTF8.self))
    }
}

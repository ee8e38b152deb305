#if canImport(Glibc)
import Glibc
#endif

/// A pthread mutex with a stable address (a class, never copied). Not
/// Sendable itself: only `Locked` and `Monitor`, which guard what it
/// protects, share it between threads.
final class PosixMutex {
    let raw: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_mutex_t())
        pthread_mutex_init(raw, nil)
    }

    deinit {
        pthread_mutex_destroy(raw)
        raw.deallocate()
    }

    @inline(__always) func lock() { pthread_mutex_lock(raw) }
    @inline(__always) func unlock() { pthread_mutex_unlock(raw) }
}

/// A condition variable bound to a `PosixMutex`.
final class PosixCondition {
    private let raw: UnsafeMutablePointer<pthread_cond_t>

    init() {
        raw = .allocate(capacity: 1)
        raw.initialize(to: pthread_cond_t())
        pthread_cond_init(raw, nil)
    }

    deinit {
        pthread_cond_destroy(raw)
        raw.deallocate()
    }

    /// Waits (the mutex held) until signalled.
    func wait(_ mutex: PosixMutex) { pthread_cond_wait(raw, mutex.raw) }

    /// Waits until signalled or `span` passes; false on timeout.
    func wait(_ mutex: PosixMutex, for span: Duration) -> Bool {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let nanos = Int(now.tv_nsec) + Int(span.wholeNanoseconds % 1_000_000_000)
        let seconds = Int(min(span.wholeNanoseconds / 1_000_000_000, UInt64(Int32.max)))
        var deadline = timespec(tv_sec: now.tv_sec + seconds + nanos / 1_000_000_000, tv_nsec: nanos % 1_000_000_000)
        return pthread_cond_timedwait(raw, mutex.raw, &deadline) == 0
    }

    func signal() { pthread_cond_signal(raw) }
    func broadcast() { pthread_cond_broadcast(raw) }
}

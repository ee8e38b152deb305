#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// A point in time an allowance after it was made (on the monotonic
/// clock): the total time a quick call may take, however its answer
/// trickles in.
public struct Deadline: Sendable, Equatable {
    /// The allowance, for messages.
    public let allowance: Duration
    /// When it passes, a `Clock.monotonicNanoseconds()` reading.
    public let instant: UInt64

    /// `allowance` from `start` (now by default).
    public init(after allowance: Duration, from start: UInt64 = Clock.monotonicNanoseconds()) {
        self.allowance = allowance
        instant = Clock.instant(after: allowance, from: start)
    }

    /// Milliseconds left, rounded up (for `poll`); nil once it has passed.
    public var remainingMilliseconds: Int32? {
        let now = Clock.monotonicNanoseconds()
        guard now < instant else { return nil }
        return Clock.elapsed(since: now, now: instant).millisecondsRoundedUp
    }

    /// Waits until `fd` has something to read (or has failed or closed:
    /// the receive then says how); false when this deadline passes first.
    public func waitReadable(_ fd: FileDescriptor) -> Bool {
        while true {
            guard let ms = remainingMilliseconds else { return false }
            var p = pollfd(fd: fd.rawValue, events: Int16(POLLIN), revents: 0)
            let rc = poll(&p, 1, ms)
            if rc > 0 || (rc < 0 && errno != EINTR) { return true }
        }
    }
}

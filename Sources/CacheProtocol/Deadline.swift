#if canImport(Glibc)
import Glibc
#endif
import CacheSystem

/// A point in time `seconds` after it was made (on the monotonic clock):
/// the total time a quick call may take, however its answer trickles in.
public struct Deadline: Sendable, Equatable {
    /// The allowance, for messages.
    public let seconds: Double
    /// When it passes, in `Clock.monotonicNanoseconds`.
    public let nanoseconds: UInt64

    /// `seconds` from `start` (now by default).
    public init(seconds: Double, from start: UInt64 = Clock.monotonicNanoseconds()) {
        self.seconds = seconds
        let allowance = seconds > 0 ? min(seconds, 1e9) * 1e9 : 0
        nanoseconds = start &+ UInt64(allowance)
    }

    /// Milliseconds left, rounded up (for `poll`); nil once it has passed.
    public var remainingMilliseconds: Int32? {
        let now = Clock.monotonicNanoseconds()
        guard now < nanoseconds else { return nil }
        return Int32(min((nanoseconds - now + 999_999) / 1_000_000, UInt64(Int32.max)))
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

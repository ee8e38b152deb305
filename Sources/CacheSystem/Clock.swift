#if canImport(Glibc)
import Glibc
#endif

/// Monotonic and wall clocks.
///
/// One rule for time in the daemon: an instant is a reading of
/// `monotonicNanoseconds()` (or, for what is stored or sent, the wall
/// clock's milliseconds or seconds), and every span, a timeout, a limit,
/// an interval or a pause, is a `Duration`. The conversions between the two
/// are here, once: `elapsed(since:)`, `instant(after:)`, and the `Duration`
/// views below for the system calls that take numbers.
public enum Clock {
    public static func monotonicNanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// The span from `start` (a `monotonicNanoseconds()` reading) to `now`;
    /// zero when `now` is not later.
    public static func elapsed(since start: UInt64, now: UInt64 = monotonicNanoseconds()) -> Duration {
        now > start ? .nanoseconds(now - start) : .zero
    }

    /// The `monotonicNanoseconds()` reading `span` after `start`; a
    /// negative span is none, and the sum saturates rather than wraps.
    public static func instant(after span: Duration, from start: UInt64 = monotonicNanoseconds()) -> UInt64 {
        let (sum, overflow) = start.addingReportingOverflow(span.wholeNanoseconds)
        return overflow ? .max : sum
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

extension Duration {
    /// Whole nanoseconds: a negative span is 0, and one past `UInt64.max`
    /// nanoseconds (585 years) is `UInt64.max`.
    public var wholeNanoseconds: UInt64 {
        guard self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return .max }
        let (sum, overflow2) = whole.addingReportingOverflow(UInt64(attoseconds / 1_000_000_000))
        return overflow2 ? .max : sum
    }

    /// The span in seconds, for messages and for values stored or sent as seconds.
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// `2`, `0.5`, `2.25`: the span in seconds as a person writes them, for messages.
    public var secondsText: String {
        let seconds = inSeconds
        if seconds == seconds.rounded(), abs(seconds) < 1e15 { return String(Int64(seconds)) }
        return String(seconds)
    }

    /// Whole milliseconds, rounded down: 0 for a negative span, at most
    /// `Int64.max` (a span added to a wall-clock reading in milliseconds).
    public var wholeMilliseconds: Int64 {
        guard self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        guard !overflow else { return .max }
        let (sum, overflow2) = whole.addingReportingOverflow(attoseconds / 1_000_000_000_000_000)
        return overflow2 ? .max : sum
    }

    /// Whole seconds, rounded down; 0 for a negative span.
    public var wholeSeconds: Int64 { self > .zero ? components.seconds : 0 }

    /// Milliseconds rounded up, between 0 and `Int32.max`: a timeout for
    /// `poll` or `epoll_wait`, which must not wake before the span has
    /// passed, or for libcurl's `_MS` options.
    public var millisecondsRoundedUp: Int32 {
        let nanos = wholeNanoseconds
        return Int32(min(nanos / 1_000_000 + (nanos % 1_000_000 == 0 ? 0 : 1), UInt64(Int32.max)))
    }

    /// A span of `seconds` that is never negative and at most a billion
    /// seconds (a timeout read from a setting or an argument: 0 is none).
    public static func clampedSeconds(_ seconds: Double) -> Duration {
        guard seconds.isFinite, seconds > 0 else { return seconds == .infinity ? .seconds(1_000_000_000) : .zero }
        return .seconds(Swift.min(seconds, 1_000_000_000))
    }
}

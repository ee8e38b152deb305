import Testing
@testable import CacheSystem

/// The one place spans meet the numbers system calls take (Clock.swift):
/// every edge a timeout can have, a negative one, a huge one, a fraction.
@Suite struct DurationTests {
    @Test func wholeNanosecondsClampNegativeAndHugeSpans() {
        #expect(Duration.seconds(1.5).wholeNanoseconds == 1_500_000_000)
        #expect(Duration.nanoseconds(7).wholeNanoseconds == 7)
        #expect(Duration.zero.wholeNanoseconds == 0)
        #expect(Duration.seconds(-3).wholeNanoseconds == 0)
        #expect(Duration.milliseconds(-1).wholeNanoseconds == 0)
        #expect(Duration.seconds(Int64.max).wholeNanoseconds == UInt64.max)
        #expect(Duration.nanoseconds(UInt64.max).wholeNanoseconds == UInt64.max)
    }

    @Test func wholeMillisecondsRoundDownAndClamp() {
        #expect(Duration.seconds(1.5).wholeMilliseconds == 1500)
        #expect(Duration.microseconds(1999).wholeMilliseconds == 1)
        #expect(Duration.milliseconds(-5).wholeMilliseconds == 0)
        #expect(Duration.seconds(Int64.max).wholeMilliseconds == Int64.max)
    }

    @Test func millisecondsRoundUpSoAWaitNeverEndsEarly() {
        #expect(Duration.nanoseconds(1).millisecondsRoundedUp == 1)
        #expect(Duration.milliseconds(1).millisecondsRoundedUp == 1)
        #expect(Duration.microseconds(1001).millisecondsRoundedUp == 2)
        #expect(Duration.zero.millisecondsRoundedUp == 0)
        #expect(Duration.seconds(-1).millisecondsRoundedUp == 0)
        #expect(Duration.seconds(1 << 40).millisecondsRoundedUp == Int32.max)
    }

    @Test func secondsForMessagesAndWholeSecondsForLimits() {
        #expect(Duration.milliseconds(250).inSeconds == 0.25)
        #expect(Duration.seconds(300).inSeconds == 300)
        #expect(Duration.milliseconds(1999).wholeSeconds == 1)
        #expect(Duration.seconds(-5).wholeSeconds == 0)
        #expect(Duration.seconds(2).secondsText == "2" && Duration.milliseconds(500).secondsText == "0.5")
        #expect(Duration.milliseconds(2250).secondsText == "2.25")
        #expect(Duration.clampedSeconds(0.5) == .milliseconds(500))
        #expect(Duration.clampedSeconds(-1) == .zero && Duration.clampedSeconds(.nan) == .zero)
        #expect(Duration.clampedSeconds(1e300) == .seconds(1_000_000_000))
        #expect(Duration.clampedSeconds(.infinity) == .seconds(1_000_000_000))
    }

    @Test func instantsAndSpansMeetWithoutWrapping() {
        #expect(Clock.elapsed(since: 10, now: 25) == .nanoseconds(15))
        #expect(Clock.elapsed(since: 25, now: 10) == .zero, "a reading before the start is no time")
        #expect(Clock.instant(after: .seconds(2), from: 5) == 2_000_000_005)
        #expect(Clock.instant(after: .seconds(-2), from: 5) == 5)
        #expect(Clock.instant(after: .seconds(Int64.max), from: 5) == UInt64.max, "saturates")
        let now = Clock.monotonicNanoseconds()
        #expect(Clock.instant(after: .zero) >= now)
    }

    @Test func aTimedWaitWaitsItsSpanAndNoLonger() {
        let m = Monitor(0)
        let start = Clock.monotonicNanoseconds()
        #expect(m.wait(for: .milliseconds(50)) { _ -> Bool? in nil } == nil)
        // At least the span (the clock is monotonic); no upper bound is
        // asserted on a shared machine.
        #expect(Clock.elapsed(since: start) >= .milliseconds(50))
        #expect(m.wait(for: .seconds(-1)) { _ -> Bool? in nil } == nil, "a negative span does not wait")
    }
}

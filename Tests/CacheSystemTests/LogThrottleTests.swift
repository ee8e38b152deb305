import Testing
@testable import CacheSystem

/// A message that recurs is logged once per interval, with a count of the rest.
@Suite struct LogThrottleTests {
    @Test func aMillionRepeatsInTenSecondsAreOneLineAndACount() {
        var t = LogThrottle(interval: .seconds(10))
        let second: UInt64 = 1_000_000_000
        var logged = 0
        for i in 0..<1_000_000 where t.admit("accept", now: 1 + UInt64(i) * 9_000) != nil { logged += 1 }
        #expect(logged == 1, "9 s of EMFILE at a million a second: one line")
        #expect(t.admit("accept", now: 11 * second) == 999_999, "the next line says how many were held back")
        #expect(t.admit("shed", now: 11 * second) == 0, "each kind on its own")
        #expect(t.admit("accept", now: 11 * second + 1) == nil)
        #expect(LogThrottle.suffix(0).isEmpty && LogThrottle.suffix(3).contains("3 more"))
    }
}

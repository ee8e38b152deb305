import Testing
@testable import CacheService
import CacheSystem

/// `ForcibleFlight`: who runs, who joins, who is queued behind an unforced
/// refresh, and that the queued ask again only after it ended.
@Suite struct ForcibleFlightTests {
    @Test func aForcedCallerIsQueuedBehindAnUnforcedRefreshAndAsksAgainAfterIt() {
        let flight = ForcibleFlight<Int>()
        let got = Locked<[String]>([])
        func waiter(_ name: String) -> @Sendable (Int) -> Void { { v in got.withLock { $0.append("\(name)=\(v)") } } }
        func again(_ name: String) -> @Sendable () -> Void { { got.withLock { $0.append("\(name) again") } } }

        #expect(flight.join(force: false, waiter: waiter("a"), again: again("a")) == .run)
        #expect(flight.join(force: false, waiter: waiter("b"), again: again("b")) == .joined)
        #expect(flight.join(force: true, waiter: waiter("f"), again: again("f")) == .queued)
        flight.finish(1)
        #expect(got.withLock { $0 } == ["a=1", "b=1", "f again"], "the forced caller had no unforced result")

        // Asked again: nothing runs now, so it runs; anyone joins a forced refresh.
        #expect(flight.join(force: true, waiter: waiter("f"), again: again("f")) == .run)
        #expect(flight.join(force: false, waiter: waiter("c"), again: again("c")) == .joined)
        #expect(flight.join(force: true, waiter: waiter("g"), again: again("g")) == .joined)
        flight.finish(2)
        #expect(got.withLock { $0 }.suffix(3) == ["f=2", "c=2", "g=2"])
        #expect(flight.join(force: false, waiter: waiter("d"), again: again("d")) == .run, "a finished flight is gone")
    }
}

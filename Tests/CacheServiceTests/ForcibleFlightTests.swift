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

    /// The queued forced callers go first: an unforced caller that comes
    /// while the last refresh's end is asking them again (here, from a
    /// waiter's callback) waits for the forced refresh instead of starting
    /// an unforced one that would queue them once more, for ever under a
    /// steady stream of prefetches.
    @Test func anUnforcedCallerArrivingAsAForceIsAskedAgainWaitsForIt() {
        let r = Callers()
        // The unforced refresh's waiter starts another prefetch at once.
        let chaining: @Sendable (Int) -> Void = { v in
            r.got.withLock { $0.append("a=\(v)") }
            let joined = r.flight.join(force: false, waiter: r.waiter("u"), again: {})
            r.roles.withLock { $0["u"] = joined }
        }
        #expect(r.flight.join(force: false, waiter: chaining, again: {}) == .run)
        #expect(r.flight.join(force: true, waiter: r.waiter("f"), again: r.forced("f")) == .queued)
        #expect(r.flight.join(force: true, waiter: r.waiter("g"), again: r.forced("g")) == .queued)
        r.flight.finish(1)
        #expect(r.roles.withLock { $0 } == ["u": .joined, "f": .run, "g": .joined], "\(r.roles.withLock { $0 })")
        r.flight.finish(2)
        #expect(r.got.withLock { $0 } == ["a=1", "f=2", "u=2", "g=2"], "\(r.got.withLock { $0 })")
        // Nothing is held back once the forced refresh ran.
        #expect(r.flight.join(force: false, waiter: r.waiter("d"), again: {}) == .run)
    }

    /// A flight, what its waiters got, and what each caller's join made of it.
    final class Callers: Sendable {
        let flight = ForcibleFlight<Int>()
        let got = Locked<[String]>([])
        let roles = Locked<[String: ForcibleFlight<Int>.Joined]>([:])

        func waiter(_ name: String) -> @Sendable (Int) -> Void { { [got] v in got.withLock { $0.append("\(name)=\(v)") } } }
        /// A forced caller's `again`: it joins again, as the refreshers' do.
        func forced(_ name: String) -> @Sendable () -> Void {
            { [self] in
                let joined = flight.join(force: true, waiter: waiter(name), again: forced(name))
                roles.withLock { $0[name] = joined }
            }
        }
    }
}

import CacheSystem
import Testing
@testable import CacheService
@testable import CacheStore

/// The scrub's pacing, schedule and counts, without a thread or a clock
/// (docs/operations.md, "Scrub").
@Suite struct ScrubPacingTests {
    static let second: UInt64 = 1_000_000_000

    @Test func eachObjectPushesTheNextByItsSizeOverTheRate() {
        var pacer = ScrubPacer(rate: 1000)
        // Ten objects of 500 bytes hashed back to back from t = 10 s: the
        // last may begin no sooner than 5 s after the first did.
        var next: UInt64 = 0
        var t = 10 * Self.second
        for _ in 0..<10 {
            next = pacer.hashed(500, startedAt: t)
            t = next
        }
        #expect(next == 15 * Self.second)
        // A large object counts all its bytes: 64 KiB at 1000 B/s is 65.536 s.
        #expect(pacer.hashed(65_536, startedAt: next) == next + 65_536_000_000)
    }

    @Test func theHashingItselfCountsAndIdleTimeEarnsNoBurst() {
        var pacer = ScrubPacer(rate: 1000)
        // 1000 bytes begun at 0: the next no sooner than 1 s later, however long the hash took.
        let first = pacer.hashed(1000, startedAt: 0)
        #expect(first == Self.second)
        // Begun 100 s later (a slow disk, a pause): nothing banked, one second again.
        #expect(pacer.hashed(1000, startedAt: 101 * Self.second) == 102 * Self.second)
        // Begun early (the pacer was not waited for): the debt stays.
        #expect(pacer.hashed(1000, startedAt: 101 * Self.second) == 103 * Self.second)
    }

    @Test func aNewRateForgivesWhatTheOldOneOwed() {
        var pacer = ScrubPacer(rate: 1)
        let owed = pacer.hashed(3600, startedAt: 0)
        #expect(owed == 3600 * Self.second)
        pacer.change(rate: 1)
        #expect(pacer.next == owed, "the same rate changes nothing")
        pacer.change(rate: 1 << 30)
        #expect(pacer.rate == 1 << 30 && pacer.next == 0)
        #expect(pacer.hashed(1 << 30, startedAt: 5 * Self.second) == 6 * Self.second)
        #expect(ScrubPacer(rate: 0).rate == 1 && ScrubSettings(interval: .seconds(1), rate: -5).rate == 1, "a rate is never 0")
    }

    @Test func passesStartAnIntervalApartAndNotRightAtStartUp() {
        let day: Int64 = 86_400, week = 7 * day
        let dayLong = Duration.seconds(day), weekLong = Duration.seconds(week)
        let start: Int64 = 1_764_000_000
        // Never scrubbed: ten minutes after the start, or the interval when shorter.
        #expect(ScrubSchedule.nextStart(lastStarted: nil, interval: weekLong, daemonStart: start, now: start) == start + 600)
        #expect(ScrubSchedule.nextStart(lastStarted: nil, interval: .seconds(2), daemonStart: start, now: start) == start + 2)
        // The last started a day ago: six days on.
        #expect(ScrubSchedule.nextStart(lastStarted: start - day, interval: weekLong, daemonStart: start, now: start) == start + 6 * day)
        // Overdue at start-up (the daemon was down): after the start-up delay.
        #expect(ScrubSchedule.nextStart(lastStarted: start - 2 * week, interval: weekLong, daemonStart: start, now: start) == start + 600)
        // Overdue later (a pass longer than the interval): now.
        let later = start + 3 * day
        #expect(ScrubSchedule.nextStart(lastStarted: start, interval: dayLong, daemonStart: start, now: later) == later)
        // Less than a second between passes is a second, never none.
        #expect(ScrubSchedule.nextStart(lastStarted: later, interval: .milliseconds(500), daemonStart: start, now: later) == later + 1)
        #expect(!ScrubSettings(interval: .milliseconds(500)).isOff && ScrubSettings(interval: .zero).isOff)
        // A last start in the future (the clock was set back) counts as now.
        #expect(ScrubSchedule.nextStart(lastStarted: later + week, interval: dayLong, daemonStart: start, now: later) == later + day)
    }

    @Test func thePositionIsSavedOnceAMinuteOrMoreOftenForShortIntervals() {
        #expect(ScrubSchedule.checkpoint(interval: ScrubSettings.defaultInterval) == .seconds(60))
        #expect(ScrubSchedule.checkpoint(interval: .seconds(6000)) == .seconds(60))
        #expect(ScrubSchedule.checkpoint(interval: .seconds(3000)) == .seconds(30))
        #expect(ScrubSchedule.checkpoint(interval: .seconds(50)) == .seconds(1))
    }

    @Test func findingsAreCountedInThePassAndSinceTheStart() {
        var p = Scrubber.Progress()
        p.state.current = ScrubState.Pass(started: 100)
        p.passObjects = 5
        p.passBytes = 500
        let refs = (0..<5).map { ObjectRef(hash: Hash128(high: 0, low: UInt64($0)), size: 100, type: .png) }
        let findings: [ScrubFinding] = [.clean, .corrupt, .unreadable, .missing, .skipped]
        for (ref, finding) in zip(refs, findings) { p.record(ref, finding) }
        let pass = p.state.current
        #expect(pass?.position == refs[4].hash, "a skipped object is passed over")
        #expect(pass?.totals == ScrubTotals(objects: 4, bytes: 400, corrupt: 1, unreadable: 1, missing: 1))
        #expect(p.passObjects == 4 && p.passBytes == 400, "one object left the index during the pass")
        #expect(p.sinceStart == pass?.totals)
        let done = p.finish(at: 160)
        #expect(done == ScrubState.Finished(started: 100, ended: 160, totals: ScrubTotals(objects: 4, bytes: 400, corrupt: 1, unreadable: 1, missing: 1)))
        #expect(p.state.current == nil && p.state.last == done)
        #expect(p.finish(at: 200) == nil, "no pass under way")
    }

    @Test func theStatusSaysOffIdleOrRunning() {
        let scrubber = Scrubber(ScrubSettings(interval: .seconds(60), rate: 1 << 20))
        #expect(scrubber.status().state == .idle)
        scrubber.progress.withLock { $0.state.current = ScrubState.Pass(started: 1); $0.passObjects = 3 }
        let running = scrubber.status()
        #expect(running.state == .running && running.pass?.objects == 3 && running.nextStart == nil)
        scrubber.apply(ScrubSettings(interval: .zero, rate: 1 << 20))
        #expect(scrubber.status().state == .off && scrubber.status().pass != nil, "paused where it was")
    }
}

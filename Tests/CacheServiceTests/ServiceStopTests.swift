import TestSupport
import Testing
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// Shutdown raises the store's stop flag first (`CacheService.shutdown`):
/// the scrub's check, `verify`, gc and compaction then return early,
/// judging nothing and leaving the store as it was.
@Suite struct ServiceStopTests {
    @Test func theScrubVerifyGcAndCompactionStopOnceTheFlagIsRaised() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let entries = try await ServiceMaintenanceTests.prefetched(h)
        let object = try #require(entries[3].object)
        let before = ServiceMaintenanceTests.contents(object.path)
        s.store.stopPasses()

        #expect(s.scrub.check(object.hash) == .stopped, "the hash is cut short, and nothing is judged")
        var counts = ScrubTotals()
        counts.count(.stopped, size: 100)
        #expect(counts == ScrubTotals(), "a check cut short is not counted")

        let report = await completion { s.verify(then: $0) }
        #expect(report.checked == 0 && report.corrupt.isEmpty)
        #expect(s.status().counters.quarantined == 0)

        for result in [await completion { s.compact(then: $0) }.map { _ in () }, await completion { s.collectGarbage(then: $0) }.map { _ in () }] {
            guard case .failure(.store(.stopped, _)) = result else {
                Issue.record("expected a stop: \(result)")
                continue
            }
        }
        #expect(ServiceMaintenanceTests.contents(object.path) == before)
        let row = await answer { s.image(row: 3, fetch: false, then: $0) }
        #expect(row.value?.object == object, "still cached, and served")
    }

    /// The commit threads and the workers share one drain deadline
    /// (`workerDrainTimeout`, 7 s), so that the stop stays inside systemd's
    /// `TimeoutStopSec`: a commit that takes 4.5 s and then queues a worker's
    /// job of 4.5 s (a completion runs on a worker) ends the drain at the
    /// deadline, the worker's job abandoned and the stop not clean. With a
    /// deadline each, the worker would have been waited for, the stop taking
    /// 9 s and claiming to be clean.
    @Test func theCommitThreadsAndTheWorkersShareOneDrainDeadline() throws {
        let held = 4.5
        let deadline = CacheService.workerDrainTimeout
        #expect(Duration.seconds(held) < deadline && Duration.seconds(2 * held) > deadline)
        let quiet = try Harness(origin: nil, feeds: Harness.feeds(nil))
        defer { quiet.close() }
        #expect(quiet.shutdownService() == true, "a stop with nothing held is clean")

        let h = try Harness(origin: nil, feeds: Harness.feeds(nil))
        defer { h.close() }
        let s = h.service
        let workerRan = Locked(false)
        s.commits.submit {
            Thread.sleep(forTimeInterval: held)
            s.pool.submit {
                Thread.sleep(forTimeInterval: held)
                workerRan.withLock { $0 = true }
            }
        }
        let start = Clock.monotonicNanoseconds()
        let clean = h.shutdownService()
        let took = Clock.elapsed(since: start)
        #expect(clean == false, "a stop that abandoned the worker's job said it was clean")
        #expect(!workerRan.withLock { $0 }, "the worker's job was waited for past the deadline")
        #expect(took < .seconds(2 * held), "the stop took \(took), as long as both jobs together")
    }
}

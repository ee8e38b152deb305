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
}

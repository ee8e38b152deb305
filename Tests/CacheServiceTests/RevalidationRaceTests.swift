import TestSupport
import Testing
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// A stale row's object removed (evicted, collected, a missing file) after
/// the prefetch planned its revalidation and before the 304 arrives: a 304
/// has no bytes to put back, so the row is not reported as unchanged.
@Suite struct RevalidationRaceTests {
    @Test func a304ForAnObjectRemovedMeanwhileIsAFailureNotASuccess() async throws {
        let h = try await Harness.start(feeds: { o in
            var f = Harness.feeds(o)
            f.imagesRevalidateAfter = .seconds(1)
            return f
        })
        defer { h.close() }
        let s = h.service
        _ = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        let ref = try #require(s.store.row(0)?.object)
        try await Task.sleep(nanoseconds: 1_300_000_000)  // every row stale now
        let removed = Locked(false)
        let report = try await completion { s.prefetch(.images, force: false, progress: { p in
            // The first images progress comes after the plan, before any transfer starts.
            guard p.phase == "images", !removed.withLock({ let was = $0; $0 = true; return was }) else { return }
            try? s.store.forgetObject(ref.hash)
        }, then: $0) }.get()
        let images = try #require(report.images)
        let rowsOfThatObject = images.failures.filter { $0.error.contains("is not in the store") }
        #expect(!rowsOfThatObject.isEmpty, "the rows whose copy went are failures: \(images)")
        // The next prefetch downloads them again.
        let again = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(again.images?.failed == 0, "\(String(describing: again.images))")
        #expect(s.store.row(0)?.object != nil)
    }
}

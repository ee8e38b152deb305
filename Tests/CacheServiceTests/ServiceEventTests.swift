import Testing
@testable import CacheService
import CacheSystem

/// The service's observers (issue 22): the daemon with HTTP on crashed after
/// about 5,000 events, each read of the observer having wrapped it in more
/// reabstraction thunks until calling it overflowed a worker's stack.
@Suite struct ServiceEventTests {
    @Test func aMillionEventsReachTheObserverAndItStaysCallable() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let count = Locked(0)
        h.service.onEvent = { _ in count.withLock { $0 += 1 } }
        let event = ServiceEvent.progress(Progress(phase: "images", done: 1, total: 2, bytes: 3))
        for _ in 0..<1_000_000 { h.service.emit(event) }
        #expect(count.withLock { $0 } == 1_000_000)
        // The getter hands back a closure that still works, however often read.
        for _ in 0..<1_000 { _ = h.service.onEvent }
        h.service.onEvent?(event)
        #expect(count.withLock { $0 } == 1_000_001)
    }

    @Test func theFinishedCallbackSurvivesManyPrefetchesAndReads() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let finished = Locked(0)
        h.service.onPrefetchFinished = { finished.withLock { $0 += 1 } }
        for _ in 0..<100_000 { _ = h.service.prefetchFinished.withLock { $0 } }
        for _ in 0..<3 {
            _ = await completion { h.service.prefetch(.posts, force: true, progress: { _ in }, then: $0) }
        }
        #expect(finished.withLock { $0 } == 3)
    }
}

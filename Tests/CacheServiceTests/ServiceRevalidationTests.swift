import TestSupport
import Testing
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// Revalidation as the service plans it, against the fault origin.
@Suite struct ServiceRevalidationTests {
    static func imageRequests(_ origin: ServiceOrigin) throws -> [ServiceOrigin.LoggedRequest] {
        try origin.requests().filter { ServicePrefetchTests.isImageRequest($0) }
    }

    /// A row cached by a store older than format version 3 has no
    /// validators: the next prefetch fetches it once without any, and the
    /// same bytes keep its object (`unchanged`); then it is fresh.
    @Test func aRowCachedWithoutFreshnessIsFetchedOnceUnconditionally() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        try #require(await answer { s.images(offset: 0, limit: 0, then: $0) }.value != nil)
        let url = try #require(s.manifestView().resolved(0))
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/images/" + ExampleOrigin.manifestURLs()[0])))
        let w = try s.store.newObjectWriter(maxSize: 1 << 20)
        try bytes.withUnsafeBytes { try w.append($0) }
        let legacy = try s.store.commitObject(w, rows: s.manifestView().rows(for: url))  // no freshness, as version 2 logged it
        #expect(s.store.row(0)?.freshness == nil)

        let first = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        let rowsOnURL = s.manifestView().rows(for: url).count
        #expect(first.images?.revalidated == rowsOnURL && first.images?.unchanged == rowsOnURL && first.images?.changed == 0)
        let urls = Set(try ExampleOrigin.manifestURLs()).count
        #expect(first.images?.downloaded == 16 - rowsOnURL && first.images?.transfers == urls)
        let sent = try Self.imageRequests(h.origin!).filter { url.hasSuffix($0.path) }
        #expect(sent.count == 1 && sent[0].ifNoneMatch == nil && sent[0].headers["if-modified-since"] == nil, "\(sent)")
        #expect(s.store.row(0)?.object == legacy && s.store.row(0)?.freshness != nil)

        let second = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(second.images?.cached == 16 && second.images?.transfers == 0)
    }

    /// images-revalidate-after 0: an answer that states no lifetime is never
    /// revalidated; `force` still downloads everything.
    @Test func zeroMeansNeverAndForceStillDownloads() async throws {
        let h = try await Harness.start(feeds: { o in
            var f = Harness.feeds(o)
            f.imagesRevalidateAfter = .zero
            return f
        })
        defer { h.close() }
        let s = h.service
        _ = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        let row = try #require(s.store.row(0)?.freshness)
        #expect(row.lifetime == .unstated && !row.isStale(now: .max, revalidateAfter: .zero))
        let before = try Self.imageRequests(h.origin!).count
        let again = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(again.images?.cached == 16 && again.images?.transfers == 0)
        let forced = try await completion { s.prefetch(.images, force: true, progress: { _ in }, then: $0) }.get()
        #expect(forced.images?.downloaded == 16 && forced.images?.revalidated == 0)
        let urls = Set(try ExampleOrigin.manifestURLs()).count
        #expect(try Self.imageRequests(h.origin!).count == before + urls)
    }
}

import TestSupport
import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// `verify`, `collectGarbage`, `compact`, and `apply` of reloaded feed settings.
@Suite struct ServiceMaintenanceTests {
    /// Every row cached; the entries of all rows.
    static func prefetched(_ h: Harness) async throws -> [ImageEntry] {
        let s = h.service
        let report = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        try #require(report.images?.downloaded == 16)
        let page = await answer { s.images(offset: 0, limit: nil, then: $0) }
        try #require(page.isNow)
        return try page.result.get().images
    }

    /// Flips one byte in the middle of a file, keeping its size.
    static func corrupt(_ path: String) throws {
        _ = chmod(path, 0o600)
        let fd = open(path, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { throw SupportError("cannot open \(path): errno \(errno)") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0, st.st_size > 0 else { throw SupportError("cannot stat \(path)") }
        let at = off_t(st.st_size / 2)
        var byte: UInt8 = 0
        guard pread(fd, &byte, 1, at) == 1 else { throw SupportError("cannot read \(path)") }
        byte ^= 0xFF
        guard pwrite(fd, &byte, 1, at) == 1 else { throw SupportError("cannot write \(path)") }
    }

    static func contents(_ path: String) -> [UInt8]? {
        (try? Data(contentsOf: URL(fileURLWithPath: path))).map { Array($0) }
    }

    @Test func verifyFindsACorruptObjectAndDownloadsItAgain() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let entries = try await Self.prefetched(h)
        let object = try #require(entries[3].object)
        let name = try ExampleOrigin.manifestURLs()[3]
        let png = try h.origin!.file("images/" + name)
        try Self.corrupt(object.path)
        #expect(Self.contents(object.path) != png)

        let report = await completion { s.verify(then: $0) }
        #expect(report.checked == 15)
        #expect(report.corrupt == [object.hash.hex])
        #expect(report.repaired == 1)
        #expect(Self.contents(object.path) == png, "repaired on disk")
        #expect(s.status().counters.quarantined == 1)
        let row = await answer { s.image(row: 3, fetch: false, then: $0) }
        #expect(row.isNow)
        #expect(row.value?.object == object)
        let log = try await h.origin!.requests(atLeast: 18)
        #expect(log.filter { $0.path == "/images/" + name }.count == 2)

        let clean = await completion { s.verify(then: $0) }
        #expect(clean.checked == 15)
        #expect(clean.corrupt.isEmpty)
        #expect(clean.repaired == 0)
    }

    /// Rows 0 and 15 hold the same bytes under two URLs: one object.
    @Test func verifyCountsAnObjectOfTwoURLsRepairedOnce() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let entries = try await Self.prefetched(h)
        let object = try #require(entries[0].object)
        try #require(entries[15].object == object)
        try Self.corrupt(object.path)

        let report = await completion { s.verify(then: $0) }
        #expect(report.corrupt == [object.hash.hex])
        #expect(Self.contents(object.path) == (try h.origin!.file("images/01-sunrise.png")))
        for row in [0, 15] {
            let a = await answer { s.image(row: row, fetch: false, then: $0) }
            #expect(a.isNow, "row \(row) is cached again")
            #expect(a.value?.object == object)
        }
        #expect(report.repaired == 1, "one corrupt object, repaired (however many URLs name it)")
    }

    @Test func garbageCollectionAndCompactionAgreeWithTheStore() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        _ = try await completion { s.prefetch(.all, force: false, progress: { _ in }, then: $0) }.get()
        // A forced prefetch logs every row's mapping again: records compaction drops.
        _ = try await completion { s.prefetch(.images, force: true, progress: { _ in }, then: $0) }.get()

        // A file in objects/ the index does not name.
        let fan = s.storeDirectory + "/objects/00"
        _ = mkdir(fan, 0o700)
        let stray = fan + "/" + String(repeating: "0", count: 30)
        try Data(repeating: 7, count: 10).write(to: URL(fileURLWithPath: stray))
        let before = s.status()

        let gc = try await completion { s.collectGarbage(then: $0) }.get()
        #expect(gc.removed == 1)
        #expect(gc.freedBytes == 10)
        #expect(access(stray, F_OK) != 0, "the stray file is gone")
        #expect(s.status().objects == before.objects)
        #expect(s.status().bytes == before.bytes)
        let again = try await completion { s.collectGarbage(then: $0) }.get()
        #expect(again.removed == 0)
        #expect(again.freedBytes == 0)

        let records = s.status().logRecords
        let compacted = try await completion { s.compact(then: $0) }.get()
        #expect(compacted.recordsBefore == records)
        #expect(compacted.recordsAfter < compacted.recordsBefore, "the forced prefetch's records were superseded")
        #expect(compacted.recordsAfter == s.status().logRecords)
        let after = s.status()
        #expect(after.objects == 15)
        #expect(after.imagesCached == 16)
        #expect(after.posts == 100)
        let hit = await answer { s.image(row: 5, fetch: false, then: $0) }
        #expect(hit.isNow)

        // The compacted log rebuilds the same store.
        h.shutdownService()
        let reopened = try Harness(origin: nil, feeds: Harness.feeds(nil), storeDirectory: h.storeDirectory, directory: h.directory)
        defer { reopened.close(keepDirectory: true) }
        let r = reopened.service.status()
        #expect(r.posts == 100)
        #expect(r.images == 16)
        #expect(r.imagesCached == 16)
        #expect(r.objects == 15)
        #expect(r.bytes == after.bytes)
        #expect((try? reopened.service.post(id: 7).get()) == (try? s.post(id: 7).get()))
    }

    @Test func aChangedPostsURLIsFetchedWithoutTheOldValidators() async throws {
        let posts = try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/posts.json"))
        let h = try await Harness.start(extra: ["posts2.json": Array(posts)],
                                        feeds: { Harness.feeds($0, posts: "/etag/posts.json") })
        defer { h.close() }
        let s = h.service
        let refresh = { () async throws -> PostsSummary? in
            try await completion { s.prefetch(.posts, force: false, progress: { _ in }, then: $0) }.get().posts
        }

        #expect(try await refresh()?.fetched == 100)
        #expect(try await refresh()?.unchanged == 100)
        var log = try await h.origin!.requests(atLeast: 2)
        #expect(log.map(\.status) == [200, 304])
        let tag = try #require(log.last?.ifNoneMatch, "the second refresh is conditional")
        #expect(log.first?.ifNoneMatch == nil)

        // The same bytes under a new URL have the same ETag: sending it would get a 304.
        var changed = Harness.feeds(h.origin, posts: "/etag/posts2.json")
        changed.maxObjectSize = 1 << 20
        s.apply(changed)
        #expect(try await refresh()?.unchanged == 100)
        log = try await h.origin!.requests(atLeast: 3)
        #expect(log.count == 3)
        #expect(log.last?.path == "/etag/posts2.json")
        #expect(log.last?.ifNoneMatch == nil, "a changed URL is fetched unconditionally")
        #expect(log.last?.status == 200)

        // Validators apply again from then on.
        _ = try await refresh()
        log = try await h.origin!.requests(atLeast: 4)
        #expect(log.last?.path == "/etag/posts2.json")
        #expect(log.last?.ifNoneMatch == tag)
        #expect(log.last?.status == 304)

        // Applying the same settings changes nothing: still conditional.
        s.apply(changed)
        _ = try await refresh()
        log = try await h.origin!.requests(atLeast: 5)
        #expect(log.last?.ifNoneMatch == tag)
    }
}

import TestSupport
import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheStore
import CacheSystem

/// `prefetch`: summaries, progress, joining.
@Suite struct ServicePrefetchTests {
    /// The images the example manifest names (16 files; two hold the same bytes).
    static func exampleImages() throws -> [Data] {
        try ExampleOrigin.manifestURLs().map { try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/images/" + $0)) }
    }

    static func isImageRequest(_ r: ServiceOrigin.LoggedRequest) -> Bool {
        r.path.hasPrefix("/images/") && r.path != "/images/manifest.json"
    }

    /// A feed that is its own manifest has posts without an image: their
    /// rows have no URL and are skipped, not failed (every prefetch exited
    /// 5 before). When no row has a URL, the field is likely wrong: failed.
    @Test func rowsWithoutAURLAreSkippedUnlessNoRowHasOne() async throws {
        let manifest = Array(#"[{"url": "01-sunrise.png"}, {"description": "a post without an image"}, {"url": ""}]"#.utf8)
        let h = try await Harness.start(extra: ["images/manifest.json": manifest])
        defer { h.close() }
        let some = try await completion { h.service.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(some.images?.downloaded == 1 && some.images?.skipped == 2 && some.images?.failed == 0, "\(String(describing: some.images))")
        #expect(some.images?.failures.isEmpty == true)

        let none = try await Harness.start(extra: ["images/manifest.json": Array(#"[{"image": "01-sunrise.png"}, {"image": "02-ocean.png"}]"#.utf8)])
        defer { none.close() }
        let wrong = try await completion { none.service.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(wrong.images?.failed == 2 && wrong.images?.skipped == 0)
        #expect(wrong.images?.failures.first?.error == "no url in the manifest (no row has one: is images-url-field the member that names the image? "
                + "An RSS or Atom item has an /image only from an image enclosure, media:content, media:thumbnail or itunes:image)")
        // Once a row has a URL, the others are rows without an image: skipped,
        // and no longer carrying the failure of when none had one (the review).
        let manifestPath = none.origin!.root + "/images/manifest.json"
        try PagedRefreshTests.write(none.origin!, "images/manifest.json", #"[{"url": "01-sunrise.png"}, {"image": "02-ocean.png"}]"#)
        // Dated later: a Last-Modified of the same second would be answered 304.
        try FileManager.default.setAttributes([.modificationDate: Date().addingTimeInterval(5)], ofItemAtPath: manifestPath)
        let fixed = try await completion { none.service.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        #expect(fixed.images?.downloaded == 1 && fixed.images?.skipped == 1 && fixed.images?.failed == 0, "\(String(describing: fixed.images))")
        let rows = try await answer { none.service.images(offset: 0, limit: nil, then: $0) }.result.get().images
        #expect(rows.count == 2 && rows[1].lastError == nil, "\(rows.map { String(describing: $0.lastError) })")
    }

    @Test func prefetchAllDownloadsEverythingOnceThenFindsItCached() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service

        let progress = ProgressLog()
        let first = await completion { s.prefetch(.all, force: false, progress: progress.callback, then: $0) }
        let report = try first.get()
        #expect(report.posts?.fetched == 100)
        let images = try #require(report.images)
        #expect(images.downloaded == 16)
        #expect(images.cached == 0)
        #expect(images.failed == 0)
        #expect(images.failures.isEmpty)
        let files = try Self.exampleImages()
        let distinct = Set(files)
        try #require(files.count == 16 && distinct.count == 15, "the example manifest changed")
        #expect(images.bytes == Int64(files.reduce(0) { $0 + $1.count }), "every row's download counts")
        let status = s.status()
        #expect(status.posts == 100)
        #expect(status.images == 16)
        #expect(status.imagesCached == 16)
        #expect(status.objects == 15, "rows with the same bytes share one object")
        #expect(status.bytes == Int64(distinct.reduce(0) { $0 + $1.count }))
        #expect(status.counters.downloads == 16)

        let events = progress.all
        #expect(events.map(\.phase).first == "posts")
        #expect(Set(events.map(\.phase)) == ["posts", "images"])
        for phase in ["posts", "images"] {
            let done = events.filter { $0.phase == phase }.map(\.done)
            #expect(done == done.sorted(), "\(phase) progress went back: \(done)")
        }
        let last = try #require(events.last)
        #expect(last.phase == "images")
        #expect(last.done == 16)
        #expect(last.total == 16)
        #expect(last.bytes == images.bytes)
        #expect(events.filter { $0.phase == "images" }.allSatisfy { $0.total == 16 && $0.done <= 16 })

        let second = await completion { s.prefetch(.all, force: false, progress: { _ in }, then: $0) }
        let again = try second.get()
        #expect(again.posts?.fetched == 0)
        #expect(again.posts?.unchanged == 100)
        #expect(again.images?.downloaded == 0)
        #expect(again.images?.cached == 16)
        #expect(again.images?.failed == 0)
        #expect(s.status().counters.downloads == 16, "nothing downloaded again")
        let log = try await h.origin!.requests(atLeast: 20)
        #expect(log.filter(Self.isImageRequest).count == 16)
        #expect(log.count == 20, "\(log.map(\.path))")
    }

    /// A finished download is committed by a commit thread, not a worker:
    /// with every worker held, an image still lands in the store (and its
    /// syncs never queue behind the workers' CPU work: ServiceConfiguration.commitThreads).
    @Test func aDownloadIsCommittedWhileEveryWorkerIsBusy() async throws {
        let workers = 2
        let h = try await Harness.start(workerThreads: workers)
        defer { h.close() }
        let s = h.service
        // Held without a time limit (Gate's gives up after 20 s, as long as waitUntil waits).
        let held = Locked(0), release = DispatchSemaphore(value: 0)
        for _ in 0..<workers { s.pool.submit { held.withLock { $0 += 1 }; release.wait() } }
        defer { for _ in 0..<workers { release.signal() } }
        await waitUntil { held.withLock { $0 } == workers }

        let url = h.origin!.url("/images/" + (try ExampleOrigin.manifestURLs()[0]))
        try s.store.replaceManifest([(url, nil)], pages: [FeedPage(url: "", count: 1)])
        let done = Locked<Result<FetchedImage, CacheError>?>(nil)
        s.imageFetcher.fetch(url: url, revalidating: nil, rows: { [(row: 0, url: $0)] }) { r in done.withLock { $0 = r } }
        await waitUntil { done.withLock { $0 != nil } }
        let got = try #require(done.withLock { $0 })
        let ref = try got.get().ref
        #expect(s.store.objectRef(ref.hash) != nil, "committed while both workers were held")
        #expect(s.status().counters.downloads == 1)
    }

    /// After a manifest change, threads that ask for the manifest's view at
    /// once get one view, built once (`manifestView`'s lock): its arrays
    /// share one buffer. Built by each, they would each hold their own.
    @Test func aStaleManifestViewIsRebuiltOnceForEveryThreadAskingAtOnce() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        let rows = 20_000
        try s.store.replaceManifest((0..<rows).map { ("images/\($0).png", nil) }, pages: [FeedPage(url: "", count: rows)])
        let threads = 8
        let start = DispatchSemaphore(value: 0), done = DispatchGroup()
        let buffers = Locked<[UInt]>([])
        for _ in 0..<threads {
            done.enter()
            Thread {
                start.wait()
                let v = s.manifestView()
                let address = v.resolvedURLs.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
                buffers.withLock { $0.append(address) }
                done.leave()
            }.start()
        }
        for _ in 0..<threads { start.signal() }
        try #require(done.wait(timeout: .now() + 60) == .success)
        let got = buffers.withLock { $0 }
        #expect(got.count == threads && Set(got).count == 1, "\(Set(got).count) views built")
        #expect(s.manifestView().resolvedURLs.count == rows)
    }

    @Test func twoIdenticalPrefetchesAreJoined() async throws {
        let workers = 2
        let h = try await Harness.start(workerThreads: workers)
        defer { h.close() }
        let s = h.service

        // Every worker held, so the first prefetch cannot finish before the
        // second is asked for (its feed is stored on a worker).
        let gate = Gate(workers: workers)
        for _ in 0..<workers { s.pool.submit { gate.hold() } }
        gate.waitUntilHeld()

        let progressA = ProgressLog(), progressB = ProgressLog()
        let reports = Locked<[String]>([])
        let bothDone = Gate(workers: 2)
        let record: @Sendable (Result<PrefetchReport, CacheError>) -> Void = { r in
            reports.withLock { $0.append(describe(r)) }
            bothDone.arrive()
        }
        s.prefetch(.all, force: false, progress: progressA.callback, then: record)
        s.prefetch(.all, force: false, progress: progressB.callback, then: record)
        #expect(s.status().counters.coalesced == 1)
        gate.release()
        await waitUntil { bothDone.arrived == 2 }

        let got = reports.withLock { $0 }
        #expect(got.count == 2)
        #expect(got.first == got.last, "both get the same report")
        #expect(got.first == "posts 100/0/0/0 images 16/0/0")
        #expect(s.status().counters.coalesced == 1, "one prefetch joined, nothing else")
        #expect(progressB.all.last?.done == 16, "the joined one gets the remaining progress")
        #expect(progressA.all.last?.done == 16)
        let log = try await h.origin!.requests(atLeast: 18)
        #expect(log.count == 18, "one posts, one manifest, 16 images: \(log.map(\.path))")

        // A prefetch with other arguments is not joined.
        let images = await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }
        #expect(try images.get().images?.cached == 16)
        #expect(s.status().counters.coalesced == 1)
    }

    @Test func aForcedPrefetchDownloadsAgain() async throws {
        let h = try await Harness.start()
        defer { h.close() }
        let s = h.service
        _ = try await completion { s.prefetch(.images, force: false, progress: { _ in }, then: $0) }.get()
        let forced = try await completion { s.prefetch(.images, force: true, progress: { _ in }, then: $0) }.get()
        #expect(forced.posts == nil)
        #expect(forced.images?.downloaded == 16)
        #expect(forced.images?.cached == 0)
        let log = try await h.origin!.requests(atLeast: 34)
        #expect(log.filter(Self.isImageRequest).count == 32)
        #expect(s.status().objects == 15)
    }
}

func describe(_ r: Result<PrefetchReport, CacheError>) -> String {
    switch r {
    case .success(let p):
        let posts = p.posts.map { "posts \($0.fetched)/\($0.unchanged)/\($0.removed)/\($0.invalid)" } ?? "no posts"
        let images = p.images.map { "images \($0.downloaded)/\($0.cached)/\($0.failed)" } ?? "no images"
        return posts + " " + images
    case .failure(let e):
        return "failed: \(e)"
    }
}

/// Waits (a ceiling of 20 s, never an assertion of time) until `condition` holds.
func waitUntil(_ condition: () -> Bool) async {
    for _ in 0..<2000 where !condition() { try? await Task.sleep(for: .milliseconds(10)) }
}

/// Holds worker threads until released; counts arrivals.
final class Gate: Sendable {
    private let state: Monitor<(held: Int, open: Bool, arrived: Int)>
    private let workers: Int
    init(workers: Int) {
        self.workers = workers
        state = Monitor((0, false, 0))
    }
    /// Blocks the calling thread until `release`.
    func hold() {
        state.update(wake: .all) { $0.held += 1 }
        _ = state.wait(for: .seconds(20)) { $0.open ? true : nil }
    }
    func waitUntilHeld() { _ = state.wait(for: .seconds(20)) { [workers] in $0.held == workers ? true : nil } }
    func release() { state.update(wake: .all) { $0.open = true } }
    func arrive() { state.update { $0.arrived += 1 } }
    var arrived: Int { state.update { $0.arrived } }
}

import Foundation
import Testing
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem

/// `ImageFetcher` alone: a real store in a temporary directory, and
/// transfers answered by the test (what a server would send, when the test
/// says), so each decision is seen: one transfer per URL, what a failure
/// leaves, what a 304 keeps, what is refused before any transfer.
@Suite struct ImageFetcherTests {
    static let url = "http://origin.test/a.png"
    static let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + Array("the rest of a png".utf8)

    /// Transfers held until the test answers them.
    final class HeldTransfers: ImageTransfers {
        typealias Held = (request: FetchRequest, sink: BodySink, completion: @Sendable (Result<HTTPResponse, FetchError>) -> Void)
        let held = Locked<[Held]>([])
        func fetch(_ request: FetchRequest, into sink: BodySink, completion: @escaping @Sendable (Result<HTTPResponse, FetchError>) -> Void) {
            held.withLock { $0.append((request, sink, completion)) }
        }
        var count: Int { held.withLock { $0.count } }

        /// Answers the oldest transfer held with `status` and `body`.
        func answer(_ status: Int, _ body: [UInt8] = [], headers: [String: String] = [:]) throws {
            let next = try #require(held.withLock { $0.isEmpty ? nil : $0.removeFirst() })
            if !body.isEmpty { try body.withUnsafeBytes { try next.sink.receive($0) } }
            next.completion(.success(HTTPResponse(status: status, headers: headers, bodyBytes: Int64(body.count), attempts: 1, url: next.request.url)))
        }

        /// Fails the oldest transfer held.
        func fail(_ error: FetchError) throws {
            let next = try #require(held.withLock { $0.isEmpty ? nil : $0.removeFirst() })
            next.completion(.failure(error))
        }
    }

    final class Setup {
        let directory: String
        let store: Store
        let transfers = HeldTransfers()
        let counters = Locked(CounterValues())
        let minFreeSpace: Locked<Int64>
        let fetcher: ImageFetcher
        /// Where each finished transfer was handed: "commit" or "worker".
        let handedTo: Locked<[String]>

        init(minFreeSpace: Int64 = 0) throws {
            var template = Array("/tmp/cached-fetcher-XXXXXX".utf8CString)
            directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
            store = try Store(StoreConfiguration(directory: directory))
            try store.replaceManifest([(ImageFetcherTests.url, nil)], pages: [FeedPage(url: "", count: 1)])
            let counters = counters, headroom = Locked(minFreeSpace), handedTo = Locked<[String]>([])
            self.minFreeSpace = headroom
            self.handedTo = handedTo
            fetcher = ImageFetcher(store: store, transfers: transfers, log: Logger(level: .error, environment: [:]),
                                   onWorker: { [handedTo] job in handedTo.withLock { $0.append("worker") }; job() },
                                   onCommit: { [handedTo] job in handedTo.withLock { $0.append("commit") }; job() }, bounds: { (1 << 20, headroom.withLock { $0 }) },
                                   count: { change in counters.withLock { change(&$0) } })
        }

        deinit {
            store.close()
            try? FileManager.default.removeItem(atPath: directory)
        }

        /// Fetches the URL; the results, as they come.
        func fetch(revalidating: Revalidation? = nil) -> Locked<[Result<FetchedImage, CacheError>]> {
            let results = Locked<[Result<FetchedImage, CacheError>]>([])
            fetcher.fetch(url: ImageFetcherTests.url, revalidating: revalidating, rows: { [(row: 0, url: $0)] }) { r in
                results.withLock { $0.append(r) }
            }
            return results
        }
    }

    @Test func manyAskingForOneURLMakeOneTransfer() throws {
        let s = try Setup()
        let asked = (0..<5).map { _ in s.fetch() }
        #expect(s.transfers.count == 1)
        try s.transfers.answer(200, Self.png)
        let refs = asked.compactMap { try? $0.withLock { $0 }.first?.get().ref }
        #expect(refs.count == 5 && Set(refs.map(\.hash)).count == 1)
        let ref = try #require(refs.first)
        #expect(s.store.objectRef(ref.hash) == ref && s.store.row(0)?.object == ref, "stored, and the row maps it")
        let c = s.counters.withLock { $0 }
        #expect(c.coalesced == 4 && c.downloads == 1 && c.downloadBytes == Int64(Self.png.count))
    }

    /// Answers are committed on the commit threads; failures, which have
    /// nothing to sync, go to a worker (as does every transfer cancelled
    /// at shutdown, after the commit threads stopped: CacheService.shutdown).
    @Test func answersGoToTheCommitThreadsAndFailuresToAWorker() throws {
        let s = try Setup()
        _ = s.fetch()
        try s.transfers.answer(200, Self.png, headers: ["etag": "\"v1\""])
        let ref = try #require(s.store.row(0)?.object)
        _ = s.fetch(revalidating: Revalidation(ref: ref, freshness: ImageFreshness(validators: Validators(etag: "\"v1\""), fetched: 0, lifetime: .noCache)))
        try s.transfers.answer(304)
        _ = s.fetch()
        try s.transfers.fail(.status(url: Self.url, code: 500, attempts: 3))
        _ = s.fetch()
        try s.transfers.fail(.cancelled(url: Self.url))
        #expect(s.handedTo.withLock { $0 } == ["commit", "commit", "worker", "worker"])
    }

    @Test func anOriginsFailureIsTheRowsLastErrorUntilASuccess() throws {
        let s = try Setup()
        let failed = s.fetch()
        // The client answers an error status as a failure (HTTPClient's `outcome`).
        try s.transfers.fail(.status(url: Self.url, code: 404, attempts: 1))
        guard case .failure(.origin(let f))? = failed.withLock({ $0.first }) else { Issue.record("\(failed.withLock { $0 })"); return }
        #expect(f.status == 404)
        #expect(s.fetcher.lastError(Self.url)?.status == 404 && s.counters.withLock { $0.upstreamErrors } == 1)
        _ = s.fetch()
        try s.transfers.answer(200, Self.png)
        #expect(s.fetcher.lastError(Self.url) == nil, "a success forgets the failures")
    }

    @Test func bytesThatAreNotAnImageAreTheOriginsFailure() throws {
        let s = try Setup()
        let r = s.fetch()
        try s.transfers.answer(200, Array("<html>not found</html>".utf8), headers: ["content-type": "text/html"])
        guard case .failure(.origin(let f))? = r.withLock({ $0.first }) else { Issue.record("\(r.withLock { $0 })"); return }
        #expect(f.reason.contains("text/html"), "\(f.reason)")
        #expect(s.fetcher.lastError(Self.url) != nil && s.store.row(0)?.object == nil)
    }

    @Test func belowTheHeadroomNothingIsAskedAndTheRowIsNotBlamed() throws {
        let s = try Setup(minFreeSpace: Int64.max / 2)
        let r = s.fetch()
        guard case .failure(.store(.belowHeadroom, _))? = r.withLock({ $0.first }) else { Issue.record("\(r.withLock { $0 })"); return }
        #expect(s.transfers.count == 0 && s.fetcher.lastError(Self.url) == nil)
    }

    /// The URL downloaded (ETag "v1") and at once stale: its object and the revalidation a prefetch would ask.
    static func cachedAndStale(_ s: Setup) throws -> (ObjectRef, Revalidation) {
        _ = s.fetch()
        try s.transfers.answer(200, Self.png, headers: ["etag": "\"v1\""])
        let ref = try #require(s.store.row(0)?.object)
        return (ref, Revalidation(ref: ref, freshness: ImageFreshness(validators: Validators(etag: "\"v1\""), fetched: 0, lifetime: .noCache)))
    }

    @Test func a304ToARevalidationKeepsTheObject() throws {
        let s = try Setup()
        let (ref, stale) = try Self.cachedAndStale(s)
        let r = s.fetch(revalidating: stale)
        #expect(s.transfers.held.withLock { $0.first?.request.headers } == ["If-None-Match: \"v1\""])
        try s.transfers.answer(304)
        let fetched = try #require(try r.withLock { $0 }.first?.get())
        #expect(fetched.notModified && fetched.ref == ref && s.counters.withLock { $0.downloads } == 1)
    }

    /// A download (`prefetch --force`) does not join a conditional request
    /// of the same URL that is running: its caller would get a 304, not the
    /// bytes. A conditional request does join a running download.
    @Test func aDownloadNeverJoinsARevalidationButARevalidationJoinsADownload() throws {
        let s = try Setup()
        let (ref, stale) = try Self.cachedAndStale(s)

        let conditional = s.fetch(revalidating: stale)
        let forced = s.fetch()
        #expect(s.transfers.held.withLock { $0.map(\.request.headers) } == [["If-None-Match: \"v1\""], []], "two transfers: the download is its own")
        try s.transfers.answer(304)
        try s.transfers.answer(200, Self.png)
        #expect(try conditional.withLock { $0 }.first?.get().notModified == true)
        #expect(try forced.withLock { $0 }.first?.get().notModified == false, "the forced caller got the download")

        let download = s.fetch()
        let joining = s.fetch(revalidating: stale)
        #expect(s.transfers.count == 1, "the revalidation joined the download")
        try s.transfers.answer(200, Self.png)
        #expect(try download.withLock { $0 }.first?.get().ref == ref)
        #expect(try joining.withLock { $0 }.first?.get().ref == ref)
    }

    @Test func a304ToARequestWithoutValidatorsIsAFailure() throws {
        let s = try Setup()
        let r = s.fetch()
        try s.transfers.answer(304)
        guard case .failure(.origin(let f))? = r.withLock({ $0.first }) else { Issue.record("\(r.withLock { $0 })"); return }
        #expect(f.reason.contains("sent no validators"))
    }

    @Test func aCancelledTransferIsNotTheRowsFailure() throws {
        let s = try Setup()
        let r = s.fetch()
        try s.transfers.fail(.cancelled(url: Self.url))
        #expect(r.withLock { $0.count } == 1 && s.fetcher.lastError(Self.url) == nil)
    }
}

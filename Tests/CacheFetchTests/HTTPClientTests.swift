import TestSupport
import Foundation
import Testing
import CacheFetch
import CacheSystem

/// HTTPClient against the fault origin: outcomes, attempts and what the
/// origin saw; never durations.
@Suite struct HTTPClientTests {
    private static let data = FaultOrigin.files["data.json"]!
    private static let big = FaultOrigin.files["big.bin"]!

    @Test func aGoodAnswerArrivesWholeWithItsStatusAndHeaders() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy())
        defer { client.shutdown() }
        let url = origin.url("/data.json")
        let sink = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(url, into: sink).get()
        #expect(sink.bytes == Self.data)
        #expect(response.status == 200)
        #expect(response.attempts == 1)
        #expect(response.bodyBytes == Int64(Self.data.count))
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.headers["content-length"] == String(Self.data.count))
        #expect(response.headers["last-modified"] != nil)
        // Header names are lowercased and the status line is not a header.
        #expect(response.headers.keys.allSatisfy { $0 == $0.lowercased() && !$0.hasPrefix("http/") })
        #expect(try origin.started("/data.json") == 1)
        #expect(try await origin.requests(atLeast: 1).map(\.essentials) == [.init(path: "/data.json", status: 200, userAgent: "cached-tests", ifNoneMatch: nil)])
    }

    @Test func aLargeBodyArrivesWholeOverSeveralWrites() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy())
        defer { client.shutdown() }
        let sink = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(origin.url("/big.bin"), into: sink).get()
        #expect(response.status == 200)
        #expect(response.bodyBytes == Int64(Self.big.count))
        #expect(sink.bytes == Self.big)
    }

    @Test func a404IsAStatusFailureAndNotRetried() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 3))
        defer { client.shutdown() }
        let url = origin.url("/fault/status/404/gone")
        let sink = MemorySink(limit: 1 << 20)
        let result = await client.fetch(url, into: sink)
        #expect(result.failure == .status(url: url, code: 404, attempts: 1))
        #expect(result.failure?.description == "\(url): HTTP 404")
        // The error page is not the body asked for.
        #expect(sink.bytes == [])
        #expect(try origin.started("/fault/status/404/gone") == 1)
    }

    @Test func a503IsRetriedRetriesTimes() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 2))
        defer { client.shutdown() }
        let url = origin.url("/fault/status/503/busy")
        let sink = MemorySink(limit: 1 << 20)
        let result = await client.fetch(url, into: sink)
        #expect(result.failure == .status(url: url, code: 503, attempts: 3))
        #expect(result.failure?.reason == "HTTP 503 (after 3 attempts)")
        #expect(sink.bytes == [])
        #expect(try origin.started("/fault/status/503/busy") == 3)
        let log = try await origin.requests(atLeast: 3)
        #expect(log.map(\.path) == Array(repeating: "/fault/status/503/busy", count: 3))
        #expect(log.map(\.status) == [503, 503, 503])
    }

    @Test func aTransient503ThenSuccessKeepsOnlyTheGoodBody() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        try origin.fail("/data.json", times: 2, status: 503)
        let client = try HTTPClient(policy: testPolicy(retries: 3))
        defer { client.shutdown() }
        let sink = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(origin.url("/data.json"), into: sink).get()
        #expect(response.status == 200)
        #expect(response.attempts == 3)
        #expect(sink.bytes == Self.data)
        #expect(try origin.started("/data.json") == 3)
        #expect(try await origin.requests(atLeast: 3).filter { $0.path == "/data.json" }.map(\.status) == [503, 503, 200])
    }

    @Test func aCutBodyIsATransferErrorAfterTheRetries() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 1))
        defer { client.shutdown() }
        let url = origin.url("/fault/cut/big.bin")
        let sink = MemorySink(limit: 1 << 20)
        let result = await client.fetch(url, into: sink)
        guard case let .transfer(failedURL, message, attempts)? = result.failure else {
            Issue.record("expected a transfer error, got \(result)")
            return
        }
        #expect(failedURL == url)
        #expect(attempts == 2)
        #expect(!message.isEmpty)
        // Never the whole body: what arrived is at most the half that was sent.
        #expect(sink.bytes.count <= Self.big.count / 2)
        #expect(try origin.started("/fault/cut/big.bin") == 2)
    }

    @Test func aBodyShorterThanAnnouncedIsATransferError() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 0))
        defer { client.shutdown() }
        let url = origin.url("/fault/longer/data.json")
        let result = await client.fetch(url, into: MemorySink(limit: 1 << 20))
        guard case let .transfer(failedURL, _, attempts)? = result.failure else {
            Issue.record("expected a transfer error, got \(result)")
            return
        }
        #expect(failedURL == url)
        #expect(attempts == 1)
        #expect(try origin.started("/fault/longer/data.json") == 1)
    }

    @Test func anAnnouncedBodyOverMaxBodySizeIsRefusedBeforeItIsRead() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 3))
        defer { client.shutdown() }
        let url = origin.url("/big.bin")
        let sink = MemorySink(limit: 1 << 20)
        let result = await client.fetch(FetchRequest(url: url, maxBodySize: 100_000), into: sink)
        #expect(result.failure == .rejected(url: url, reason: "larger than max-object-size \(formatSize(100_000))"))
        #expect(sink.bytes == [])
        #expect(try origin.started("/big.bin") == 1)  // not retried
        // Exactly at the limit is fine.
        let exact = MemorySink(limit: 1 << 20)
        let ok = await client.fetch(FetchRequest(url: url, maxBodySize: Int64(Self.big.count)), into: exact)
        #expect(ok.response?.status == 200)
        #expect(exact.bytes == Self.big)
    }

    @Test func aSinkThatRefusesTheBodyFailsTheFetch() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 3))
        defer { client.shutdown() }
        // Chunked: no length is announced, so only the sink can see the size.
        let url = origin.url("/fault/chunked/big.bin")
        let sink = MemorySink(limit: 100_000)
        let result = await client.fetch(url, into: sink)
        #expect(result.failure == .rejected(url: url, reason: "larger than max-object-size \(formatSize(100_000))"))
        #expect(sink.bytes.count <= 100_000)
        #expect(try origin.started("/fault/chunked/big.bin") == 1)
    }

    @Test func aChunkedBodyArrivesWhole() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy())
        defer { client.shutdown() }
        let sink = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(origin.url("/fault/chunked/big.bin"), into: sink).get()
        #expect(response.status == 200)
        #expect(response.headers["transfer-encoding"] == "chunked")
        #expect(response.headers["content-length"] == nil)
        #expect(response.bodyBytes == Int64(Self.big.count))
        #expect(sink.bytes == Self.big)
    }

    @Test func aRedirectLoopStopsAtMaxRedirects() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 3, maxRedirects: 3))
        defer { client.shutdown() }
        let url = origin.url("/fault/redirect-loop/0")
        let result = await client.fetch(url, into: MemorySink(limit: 1 << 20))
        guard case let .transfer(failedURL, message, attempts)? = result.failure else {
            Issue.record("expected a transfer error, got \(result)")
            return
        }
        #expect(failedURL == url)
        #expect(attempts == 1)  // not a transient failure
        #expect(message.lowercased().contains("redirect"), "\(message)")
        // The first request and three redirects followed; the fourth is refused.
        #expect(try (0...4).map { try origin.started("/fault/redirect-loop/\($0)") } == [1, 1, 1, 1, 0])
    }

    /// A redirect's body is read and dropped, and its connection serves the
    /// next hop; past 64 KiB the connection is closed, the redirect still followed.
    @Test(arguments: [(0, true), (1000, true), (60_000, true), (200_000, false)])
    func aRedirectsBodyIsDropped(_ bytes: Int, _ reused: Bool) async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 0))
        defer { client.shutdown() }
        let sink = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(origin.url("/fault/redirect-body/\(bytes)/data.json"), into: sink).get()
        #expect(response.status == 200 && sink.bytes == Self.data && response.bodyBytes == Int64(Self.data.count))
        let log = try await origin.requests(atLeast: 2)
        #expect(log.map(\.status) == [302, 200])
        #expect((log[0].port == log[1].port) == reused, "ports \(log.map(\.port))")
    }

    @Test(arguments: ["file", "ftp", "gopher"])
    func aRedirectToAnotherSchemeIsRefused(scheme: String) async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy(retries: 3))
        defer { client.shutdown() }
        let url = origin.url("/fault/redirect/\(scheme)")
        let sink = MemorySink(limit: 1 << 20)
        let result = await client.fetch(url, into: sink)
        guard case let .transfer(failedURL, message, attempts)? = result.failure else {
            Issue.record("expected a transfer error, got \(result)")
            return
        }
        #expect(failedURL == url)
        #expect(attempts == 1)
        #expect(message.contains(scheme), "\(message)")
        #expect(sink.bytes == [])  // not /etc/passwd, not anything
        #expect(try origin.started("/fault/redirect/\(scheme)") == 1)
    }

    @Test func onlyHTTPAndHTTPSAreFetchedAtAll() throws {
        #expect(HTTPClient.isFetchable("http://example.com/"))
        #expect(HTTPClient.isFetchable("HTTPS://example.com/"))
        #expect(!HTTPClient.isFetchable("file:///etc/passwd"))
        #expect(!HTTPClient.isFetchable("ftp://example.com/x"))
        #expect(!HTTPClient.isFetchable("httpx://example.com/"))
        #expect(!HTTPClient.isFetchable("/relative"))

        let client = try HTTPClient(policy: testPolicy())
        defer { client.shutdown() }
        let result = Locked<Result<HTTPResponse, FetchError>?>(nil)
        client.fetch(FetchRequest(url: "file:///etc/passwd"), into: MemorySink(limit: 1 << 20)) { r in result.withLock { $0 = r } }
        // Refused at once, on the calling thread.
        #expect(result.withLock { $0 }?.failure == .unsupportedScheme(url: "file:///etc/passwd"))
    }

    @Test func aConditionalRequestWithTheETagGets304() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        let client = try HTTPClient(policy: testPolicy())
        defer { client.shutdown() }
        let url = origin.url("/etag/data.json")
        let first = MemorySink(limit: 1 << 20)
        let fresh = try await client.fetch(url, into: first).get()
        #expect(fresh.status == 200)
        #expect(first.bytes == Self.data)
        let etag = try #require(fresh.headers["etag"])
        #expect(etag.hasPrefix("\"") && etag.hasSuffix("\""))

        let second = MemorySink(limit: 1 << 20)
        let unchanged = try await client.fetch(FetchRequest(url: url, headers: ["If-None-Match: \(etag)"]), into: second).get()
        #expect(unchanged.status == 304)
        #expect(unchanged.bodyBytes == 0)
        #expect(unchanged.attempts == 1)
        #expect(unchanged.headers["etag"] == etag)
        #expect(second.bytes == [])

        let third = MemorySink(limit: 1 << 20)
        let changed = try await client.fetch(FetchRequest(url: url, headers: ["If-None-Match: \"other\""]), into: third).get()
        #expect(changed.status == 200)
        #expect(third.bytes == Self.data)

        #expect(try await origin.requests(atLeast: 3).map(\.essentials) == [
            .init(path: "/etag/data.json", status: 200, userAgent: "cached-tests", ifNoneMatch: nil),
            .init(path: "/etag/data.json", status: 304, userAgent: "cached-tests", ifNoneMatch: etag),
            .init(path: "/etag/data.json", status: 200, userAgent: "cached-tests", ifNoneMatch: "\"other\""),
        ])
    }

    @Test func shutdownCancelsAHangingTransferAndWhatIsQueuedBehindIt() async throws {
        let origin = try await FaultOrigin.start()
        defer { origin.stop() }
        // One transfer at a time: the second waits in the queue.
        let client = try HTTPClient(policy: testPolicy(retries: 3, concurrency: 1))
        let hanging = origin.url("/fault/hang/30/data.json")
        let queued = origin.url("/data.json")
        let results = Locked<[String: Result<HTTPResponse, FetchError>]>([:])
        for url in [hanging, queued] {
            client.fetch(FetchRequest(url: url), into: MemorySink(limit: 1 << 20)) { r in results.withLock { $0[url] = r } }
        }
        // Wait until the origin holds the hanging request.
        var arrived = false
        for _ in 0..<500 {
            if try origin.started("/fault/hang/30/data.json") > 0 { arrived = true; break }
            try await Task.sleep(for: .milliseconds(20))
        }
        try #require(arrived, "the hanging request never reached the origin")
        #expect(results.withLock { $0.isEmpty })

        client.shutdown(timeout: .seconds(10))
        let final = results.withLock { $0 }
        #expect(final[hanging]?.failure == .cancelled(url: hanging))
        #expect(final[queued]?.failure == .cancelled(url: queued))
        #expect(final.count == 2)
        #expect(try origin.started("/data.json") == 0)

        // After shutdown every fetch is cancelled at once.
        let late = Locked<Result<HTTPResponse, FetchError>?>(nil)
        client.fetch(FetchRequest(url: queued), into: MemorySink(limit: 1 << 20)) { r in late.withLock { $0 = r } }
        #expect(late.withLock { $0 }?.failure == .cancelled(url: queued))
    }

    /// The fetch thread signals `exited` once; the first shutdown passes the
    /// signal on, so a second one does not wait its whole timeout for a
    /// thread that is long gone (it did before: 60 s here, 5 s by default).
    @Test
    func aSecondShutdownReturnsAtOnce() throws {
        let client = try HTTPClient(policy: testPolicy())
        client.shutdown(timeout: .seconds(10))
        let returned = DispatchSemaphore(value: 0)
        try Threads.start(name: "second-shutdown") {
            client.shutdown(timeout: .seconds(60))
            returned.signal()
        }
        // Generous against a noisy machine: the thread has already ended.
        #expect(returned.wait(timeout: .now() + 20) == .success, "the second shutdown waited for a thread that had already exited")
    }

    @Test func aRefusedConnectionIsRetriedThenReported() async throws {
        // A port nobody listens on: the origin's, once it is gone.
        let origin = try await FaultOrigin.start()
        let url = origin.url("/data.json")
        origin.stop()
        let client = try HTTPClient(policy: testPolicy(retries: 2))
        defer { client.shutdown() }
        let result = await client.fetch(url, into: MemorySink(limit: 1 << 20))
        guard case let .transfer(failedURL, message, attempts)? = result.failure else {
            Issue.record("expected a transfer error, got \(result)")
            return
        }
        #expect(failedURL == url)
        #expect(attempts == 3)
        #expect(!message.isEmpty)
        #expect(result.failure?.description.hasSuffix("(after 3 attempts)") == true)
    }
}


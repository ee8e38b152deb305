import Testing
import CacheFetch
import CacheSystem

@Suite struct HTTPTypesTests {
    @Test func aMemorySinkKeepsChunksUpToItsLimitAndForgetsOnReset() throws {
        let sink = MemorySink(limit: 10)
        try [UInt8]([1, 2, 3]).withUnsafeBytes { try sink.receive($0) }
        try [UInt8]([4, 5, 6, 7, 8, 9, 10]).withUnsafeBytes { try sink.receive($0) }
        #expect(sink.bytes == Array(1...10))
        let error = #expect(throws: BodyTooLarge.self) { try [UInt8]([11]).withUnsafeBytes { try sink.receive($0) } }
        #expect(error?.limit == 10)
        #expect(error?.description == "larger than max-object-size 10 B")
        #expect(sink.bytes == Array(1...10))  // the refused chunk is not kept
        sink.reset()
        #expect(sink.bytes == [])
        try [UInt8]([42]).withUnsafeBytes { try sink.receive($0) }
        #expect(sink.bytes == [42])
    }

    @Test func failuresReadAsSentencesAndCountAttemptsOnlyWhenRetried() {
        let url = "http://origin/x.png"
        #expect(FetchError.status(url: url, code: 404, attempts: 1).description == "\(url): HTTP 404")
        #expect(FetchError.status(url: url, code: 503, attempts: 4).description == "\(url): HTTP 503 (after 4 attempts)")
        #expect(FetchError.status(url: url, code: 503, attempts: 4).reason == "HTTP 503 (after 4 attempts)")
        #expect(FetchError.transfer(url: url, message: "timed out", attempts: 1).reason == "timed out")
        #expect(FetchError.transfer(url: url, message: "timed out", attempts: 2).description == "\(url): timed out (after 2 attempts)")
        #expect(FetchError.rejected(url: url, reason: "not an image").description == "\(url): not an image")
        #expect(FetchError.unsupportedScheme(url: "ftp://x").description == "refusing to fetch ftp://x: only http and https URLs are fetched")
        #expect(FetchError.unsupportedScheme(url: "ftp://x").reason == "not an http or https URL")
        #expect(FetchError.cancelled(url: url).reason == "cancelled, the daemon is stopping")
    }

    @Test func theDefaultPolicyIsWhatTheDocsSay() {
        let p = FetchPolicy()
        #expect(p.retries == 3)
        #expect(p.backoffBase == .milliseconds(250))
        #expect(p.connectTimeout == .seconds(10))
        #expect(p.totalTimeout == .seconds(300))
        #expect(p.lowSpeedTime == .seconds(30))
        #expect(p.maxRedirects == 5)
        #expect(p.concurrency == 8)
        #expect(p.userAgent == "cached")
        #expect(p.caFile == nil && p.caPath == nil && p.proxy == nil && p.noProxy == nil)
    }
}

import TestSupport
import Foundation
import Testing
import CacheFetch

/// Configured headers reach the origins they are for, hop by hop, and no
/// other: two fault origins on two ports (two origins), what each saw read
/// from its own log.
@Suite struct HTTPCredentialTests {
    static let token = "T0ken-\(UInt32.random(in: 1...UInt32.max))"
    static let apiKey = "K3y-\(UInt32.random(in: 1...UInt32.max))"

    static func credentials(token: String = token, for origins: [FaultOrigin]) throws -> FetchCredentials {
        FetchCredentials(headers: [try FetchHeader(parsing: "Authorization: Bearer \(token)"),
                                   try FetchHeader(parsing: "X-Api-Key: \(apiKey)")],
                         originsOf: origins.map { $0.url("/posts.json") })
    }

    /// Two origins whose /auth/ asks for `token`.
    static func origins() async throws -> (FaultOrigin, FaultOrigin) {
        let a = try await FaultOrigin.start(), b = try await FaultOrigin.start()
        try a.requireToken(token)
        try b.requireToken(token)
        return (a, b)
    }

    /// The configured headers in one logged request (nil for each one absent).
    static func sent(_ r: FaultOrigin.LoggedRequest) -> [String?] {
        [r.headers["authorization"]?.joined(separator: ","), r.headers["x-api-key"]?.joined(separator: ",")]
    }

    @Test func theHeadersGoToTheirOriginAndARedirectElsewhereGetsNone() async throws {
        let (a, b) = try await Self.origins()
        defer { a.stop(); b.stop() }
        let client = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(for: [a]))
        defer { client.shutdown() }

        let sink = MemorySink(limit: 1 << 20)
        _ = try await client.fetch(a.url("/auth/data.json"), into: sink).get()
        #expect(sink.bytes == FaultOrigin.files["data.json"])
        let redirected = MemorySink(limit: 1 << 20)
        let response = try await client.fetch(a.url("/auth/fault/redirect-to/\(b.port)/data.json"), into: redirected).get()
        #expect(response.status == 200 && redirected.bytes == FaultOrigin.files["data.json"])

        let onA = try await a.requests(atLeast: 2)
        #expect(onA.map(\.status) == [200, 302])
        #expect(onA.allSatisfy { Self.sent($0) == ["Bearer \(Self.token)", Self.apiKey] }, "\(onA.map(\.headers))")
        let onB = try await b.requests(atLeast: 1)
        #expect(onB.map(\.path) == ["/data.json"])
        #expect(onB.allSatisfy { Self.sent($0) == [nil, nil] }, "the redirect target got \(onB.map(\.headers))")
        // The request's own headers (the user agent here) go on every hop.
        #expect(onB.first?.userAgent == "cached-tests")
    }

    @Test func anotherOriginNeverGetsThemEvenWhenItIsConfiguredToo() async throws {
        let (a, b) = try await Self.origins()
        defer { a.stop(); b.stop() }
        let client = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(for: [a, b]))
        defer { client.shutdown() }
        // A to B: B is an origin they are for, but the request began at A.
        _ = try await client.fetch(a.url("/fault/redirect-to/\(b.port)/data.json"), into: MemorySink(limit: 1 << 20)).get()
        // B to A: A is an origin they are for, but this request began at B.
        _ = try await client.fetch(b.url("/fault/redirect-to/\(a.port)/data.json"), into: MemorySink(limit: 1 << 20)).get()
        let onA = try await a.requests(atLeast: 2), onB = try await b.requests(atLeast: 2)
        #expect(onA.map(\.path) == ["/fault/redirect-to/\(b.port)/data.json", "/data.json"])
        #expect(onA.map(Self.sent) == [["Bearer \(Self.token)", Self.apiKey], [nil, nil]])
        #expect(onB.map(\.path) == ["/data.json", "/fault/redirect-to/\(a.port)/data.json"])
        #expect(onB.map(Self.sent) == [[nil, nil], ["Bearer \(Self.token)", Self.apiKey]])
    }

    @Test func aRedirectBackToTheFirstOriginGetsThemAgain() async throws {
        let (a, b) = try await Self.origins()
        defer { a.stop(); b.stop() }
        let client = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(for: [a]))
        defer { client.shutdown() }
        let url = a.url("/fault/redirect-to/\(b.port)/fault/redirect-to/\(a.port)/auth/data.json")
        let sink = MemorySink(limit: 1 << 20)
        _ = try await client.fetch(url, into: sink).get()
        #expect(sink.bytes == FaultOrigin.files["data.json"])
        #expect(try await a.requests(atLeast: 2).map(Self.sent) == [["Bearer \(Self.token)", Self.apiKey], ["Bearer \(Self.token)", Self.apiKey]])
        #expect(try await b.requests(atLeast: 1).map(Self.sent) == [[nil, nil]])
    }

    @Test func aHostSpelledOtherwiseIsAnotherOrigin() async throws {
        let (a, _) = try await Self.origins()
        defer { a.stop() }
        // Configured for 127.0.0.1 by an upper-case scheme: the same origin.
        let configured = FetchCredentials(headers: try Self.credentials(for: []).headers, originsOf: ["HTTP://127.0.0.1:\(a.port)/x"])
        let client = try HTTPClient(policy: testPolicy(), credentials: configured)
        defer { client.shutdown() }
        _ = try await client.fetch(a.url("/data.json"), into: MemorySink(limit: 1 << 20)).get()
        // localhost reaches the same server, but is not the origin configured.
        _ = try await client.fetch("http://localhost:\(a.port)/data.json", into: MemorySink(limit: 1 << 20)).get()
        // By the Host each named: the origin logs a request after answering
        // it, on its own thread, so the log's order is not the requests'.
        let byHost = Dictionary(try await a.requests(atLeast: 2).map { ($0.headers["host"]?.first ?? "?", Self.sent($0)) }) { x, _ in x }
        #expect(byHost == ["127.0.0.1:\(a.port)": ["Bearer \(Self.token)", Self.apiKey], "localhost:\(a.port)": [nil, nil]])
    }

    @Test func a401SaysWhetherCredentialsWereSent() async throws {
        let (a, b) = try await Self.origins()
        defer { a.stop(); b.stop() }
        let url = a.url("/auth/data.json")
        let bare = try HTTPClient(policy: testPolicy())
        defer { bare.shutdown() }
        let none = await bare.fetch(url, into: MemorySink(limit: 1 << 20))
        #expect(none.failure == .status(url: url, code: 401, attempts: 1, credentials: .noneConfigured(origin: "http://127.0.0.1:\(a.port)")))
        #expect(none.failure?.reason == "HTTP 401 Unauthorized: no fetch-header is configured for this origin (http://127.0.0.1:\(a.port))")

        let wrong = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(token: "wrong", for: [a]))
        defer { wrong.shutdown() }
        let refused = await wrong.fetch(url, into: MemorySink(limit: 1 << 20))
        #expect(refused.failure?.reason == "HTTP 401 Unauthorized: the origin refused the configured fetch-header credentials (Authorization, X-Api-Key)")
        #expect(refused.failure?.description.contains("wrong") == false)

        // Configured for A, redirected to B, which asks for them.
        let right = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(for: [a]))
        defer { right.shutdown() }
        let away = a.url("/fault/redirect-to/\(b.port)/auth/data.json")
        let withheld = await right.fetch(away, into: MemorySink(limit: 1 << 20))
        #expect(withheld.failure?.reason == "HTTP 401 Unauthorized from http://127.0.0.1:\(b.port), where a redirect led: "
                + "fetch-header credentials are never sent after a redirect to another origin")
        #expect(try a.started("/auth/data.json") == 2, "a 401 is not retried: one request per fetch")
    }

    @Test func newCredentialsApplyToTheNextRequest() async throws {
        let (a, _) = try await Self.origins()
        defer { a.stop() }
        let client = try HTTPClient(policy: testPolicy(), credentials: try Self.credentials(token: "old", for: [a]))
        defer { client.shutdown() }
        let url = a.url("/auth/data.json")
        #expect(await client.fetch(url, into: MemorySink(limit: 1 << 20)).failure?.reason.contains("refused the configured") == true)
        client.credentials = try Self.credentials(for: [a])
        #expect(await client.fetch(url, into: MemorySink(limit: 1 << 20)).failure == nil)
        client.credentials = .none
        #expect(await client.fetch(url, into: MemorySink(limit: 1 << 20)).failure?.reason.contains("no fetch-header is configured") == true)
        #expect(try await a.requests(atLeast: 3).map { Self.sent($0)[0] } == ["Bearer old", "Bearer \(Self.token)", nil])
    }
}

import Foundation
import CacheFetch
import TestSupport

extension FaultOrigin {
    /// The files every origin of these tests serves, by path under its root.
    static let files: [String: [UInt8]] = [
        "data.json": Array(#"{"posts":[{"id":1,"title":"hello"},{"id":2,"title":"caf\u00e9"}]}"#.utf8),
        // Several 64 KiB chunks on the wire, and not a multiple of any.
        "big.bin": (0..<300_001).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ $0 / 977) },
    ]

    /// An origin serving `files`, for one test.
    static func start() async throws -> FaultOrigin { try await launch(files: files) }
}

/// A short-delay policy, so that retries cost milliseconds.
func testPolicy(retries: Int = 3, maxRedirects: Int = 5, concurrency: Int = 4) -> FetchPolicy {
    var policy = FetchPolicy()
    policy.retries = retries
    policy.backoffBase = .milliseconds(10)
    policy.connectTimeout = .seconds(5)
    // A ceiling so that a broken client fails the test instead of hanging it.
    policy.totalTimeout = .seconds(20)
    policy.maxRedirects = maxRedirects
    policy.concurrency = concurrency
    policy.userAgent = "cached-tests"
    // The origin is local: whatever proxy the environment names must not be used.
    policy.proxy = ""
    return policy
}

extension HTTPClient {
    /// The fetch, awaited.
    func fetch(_ request: FetchRequest, into sink: BodySink) async -> Result<HTTPResponse, FetchError> {
        await withCheckedContinuation { continuation in
            fetch(request, into: sink) { continuation.resume(returning: $0) }
        }
    }

    func fetch(_ url: String, into sink: BodySink) async -> Result<HTTPResponse, FetchError> {
        await fetch(FetchRequest(url: url), into: sink)
    }
}

extension Result where Success == HTTPResponse, Failure == FetchError {
    var failure: FetchError? { if case .failure(let e) = self { return e } else { return nil } }
    var response: HTTPResponse? { if case .success(let r) = self { return r } else { return nil } }
}

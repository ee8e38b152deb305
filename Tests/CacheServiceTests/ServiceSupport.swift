import Testing
import Glibc
import Foundation
@testable import CacheService
import CacheFetch
import CacheStore
import CacheSystem
import TestSupport

/// The fault origin serving a private copy of Examples/origin (posts.json,
/// images/) plus `extra` files, one per test.
typealias ServiceOrigin = FaultOrigin

extension FaultOrigin {
    static func start(extra: [String: [UInt8]] = [:]) async throws -> FaultOrigin {
        try await launch(copying: examples, files: extra)
    }
}

/// What Examples/origin serves, read independently of the code under test.
enum ExampleOrigin {
    /// The manifest's URLs as written, in row order.
    static func manifestURLs() throws -> [String] {
        let data = try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/images/manifest.json"))
        guard let rows = try JSONSerialization.jsonObject(with: data) as? [[String: Any]] else {
            throw SupportError("the example manifest is not a list of objects")
        }
        return rows.map { $0["url"] as? String ?? "" }
    }

    /// The posts feed's elements, each without insignificant whitespace.
    static func minifiedPosts() throws -> [[UInt8]] {
        let text = Array(try Data(contentsOf: URL(fileURLWithPath: ServiceOrigin.examples + "/posts.json")))
        return elements(ofArray: minify(text))
    }

    /// JSON text without whitespace outside strings.
    static func minify(_ text: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        var inString = false, escaped = false
        for b in text {
            if inString {
                out.append(b)
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
            } else if b == 0x20 || b == 0x0A || b == 0x0D || b == 0x09 {
                continue
            } else {
                out.append(b)
                if b == UInt8(ascii: "\"") { inString = true }
            }
        }
        return out
    }

    /// The top-level elements of a minified JSON array, as text.
    static func elements(ofArray text: [UInt8]) -> [[UInt8]] {
        var out: [[UInt8]] = []
        var current: [UInt8] = []
        var depth = 0
        var inString = false, escaped = false
        for b in text {
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
                current.append(b)
                continue
            }
            switch b {
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > 1 { current.append(b) }
            case UInt8(ascii: "]"), UInt8(ascii: "}"):
                if depth > 1 { current.append(b) }
                depth -= 1
                if depth == 0, !current.isEmpty { out.append(current); current = [] }
            case UInt8(ascii: ",") where depth == 1:
                out.append(current); current = []
            default:
                if b == UInt8(ascii: "\"") { inString = true }
                current.append(b)
            }
        }
        return out
    }
}

/// A service over a real store in a fresh temporary directory, and
/// (usually) a fault origin. `close()` shuts the service down, stops the
/// origin and removes the directory.
final class Harness {
    let origin: ServiceOrigin?
    let directory: String
    let storeDirectory: String
    let service: CacheService
    private var closed = false

    static func feeds(_ origin: ServiceOrigin?, posts: String? = "/posts.json",
                      images: String? = "/images/manifest.json") -> FeedConfiguration {
        FeedConfiguration(postsURL: posts.flatMap { p in origin.map { $0.url(p) } },
                          imagesURL: images.flatMap { p in origin.map { $0.url(p) } },
                          imagesBaseURL: nil, maxObjectSize: 1 << 20)
    }

    /// A harness with its own origin (serving `extra` too) and the default feeds.
    static func start(extra: [String: [UInt8]] = [:], workerThreads: Int = 2,
                      feeds: ((ServiceOrigin) -> FeedConfiguration)? = nil) async throws -> Harness {
        let origin = try await ServiceOrigin.start(extra: extra)
        return try Harness(origin: origin, feeds: feeds?(origin) ?? Harness.feeds(origin), workerThreads: workerThreads)
    }

    /// A harness over `storeDirectory` (default: a fresh one under the harness's directory).
    init(origin: ServiceOrigin?, feeds: FeedConfiguration, storeDirectory: String? = nil,
         directory: String? = nil, workerThreads: Int = 2) throws {
        self.origin = origin
        let dir = try directory ?? makeTempDirectory("svc-test")
        self.directory = dir
        self.storeDirectory = storeDirectory ?? dir + "/store"
        let configuration = ServiceConfiguration(feeds: feeds, storeDirectory: self.storeDirectory, maxBytes: 0,
                                                 fetch: servicePolicy(), workerThreads: workerThreads)
        do {
            service = try CacheService.open(configuration, userAgent: "test", log: Logger(level: .error, environment: [:]))
        } catch {
            if directory == nil { try? FileManager.default.removeItem(atPath: dir) }
            origin?.stop()
            throw error
        }
    }

    /// Shuts the service down (once), then stops the origin and removes the directory.
    func close(keepDirectory: Bool = false) {
        if !closed { service.shutdown(); closed = true }
        guard !keepDirectory else { return }
        origin?.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Only shuts the service down (the store stays for a reopen); whether
    /// it stopped cleanly (`CacheService.shutdown`), nil when it was already shut down.
    @discardableResult
    func shutdownService() -> Bool? {
        guard !closed else { return nil }
        closed = true
        return service.shutdown()
    }

    func url(_ path: String) -> String { origin!.url(path) }
}

/// A short-delay policy: retries cost milliseconds, and the origin is local.
func servicePolicy() -> FetchPolicy {
    var policy = FetchPolicy()
    policy.retries = 2
    policy.backoffBase = .milliseconds(10)
    policy.connectTimeout = .seconds(5)
    // A ceiling so that a broken client fails the test instead of hanging it.
    policy.totalTimeout = .seconds(20)
    policy.concurrency = 4
    policy.proxy = ""
    return policy
}

// MARK: Bridging completions

/// How an operation answered: at once, or through its completion.
enum Answer<V: Sendable>: Sendable {
    case now(Result<V, CacheError>)
    case later(Result<V, CacheError>)

    var result: Result<V, CacheError> {
        switch self {
        case .now(let r), .later(let r): return r
        }
    }
    var isNow: Bool { if case .now = self { return true } else { return false } }
    var value: V? { if case .success(let v) = result { return v } else { return nil } }
    var error: CacheError? { if case .failure(let e) = result { return e } else { return nil } }
}

/// Resumes a continuation once; a second resume is recorded as an issue
/// (an operation that answered `.now` and also called its completion, or
/// called it twice).
final class Once<V: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<V, Never>?>
    init(_ c: CheckedContinuation<V, Never>) { continuation = Locked(c) }
    func resume(_ value: V) {
        let c = continuation.withLock { c -> CheckedContinuation<V, Never>? in defer { c = nil }; return c }
        guard let c else { Issue.record("answered twice"); return }
        c.resume(returning: value)
    }
}

/// Calls an `Outcome`-returning operation and waits for its answer.
func answer<V: Sendable>(_ call: (@escaping Completion<V>) -> Outcome<V>) async -> Answer<V> {
    await withCheckedContinuation { (c: CheckedContinuation<Answer<V>, Never>) in
        let once = Once(c)
        let outcome = call { once.resume(.later($0)) }
        if case .now(let r) = outcome { once.resume(.now(r)) }
    }
}

/// Calls a completion-only operation and waits for its answer.
func completion<V: Sendable>(_ call: (@escaping @Sendable (V) -> Void) -> Void) async -> V {
    await withCheckedContinuation { (c: CheckedContinuation<V, Never>) in
        let once = Once(c)
        call { once.resume($0) }
    }
}

/// Collects progress events from any thread.
final class ProgressLog: Sendable {
    private let events = Locked<[ServiceProgress]>([])
    var all: [ServiceProgress] { events.withLock { $0 } }
    var callback: @Sendable (ServiceProgress) -> Void { { [events] p in events.withLock { $0.append(p) } } }
}


import CacheFetch
import CacheProtocol
import CacheStore
import CacheSystem

/// The daemon's request handling without sockets, for the request fuzz
/// target: the real dispatcher over a real store (a few posts and rows) in
/// `directory`, with no origin configured, so nothing is ever fetched.
public final class DispatchHarness: Sendable {
    private let dispatcher: Dispatcher
    private let mailbox: Mailbox
    private let service: CacheService

    public init(directory: String) throws {
        let store = try Store(StoreConfiguration(directory: directory))
        _ = try store.replacePosts((1...5).map { (Int64($0), Array("{\"id\":\($0),\"title\":\"t\"}".utf8)) }, validators: Validators())
        try store.replaceManifest([("a.png", "A"), ("", nil), ("file:///etc/passwd", nil)], validators: Validators())
        let log = Logger(level: .error, environment: [:])
        service = CacheService(store: store, http: HTTPClient(policy: FetchPolicy()), pool: WorkerPool(threads: 1, name: "fuzz-worker"),
                               log: log, counters: Counters(CounterValues()), settings: Settings())
        dispatcher = Dispatcher(service: service, socketPath: "fuzz")
        mailbox = try Mailbox()
    }

    /// Handles one request line; returns the answer when it is immediate.
    /// Maintenance and prefetch are not dispatched (they rewrite the disk).
    public func handle(_ line: [UInt8]) -> [UInt8]? {
        guard case .success(let request) = Request.parse(line) else { return nil }
        switch request.command {
        case .verify, .gc, .compact, .prefetch: return nil
        default: break
        }
        let reply = Reply(mailbox: mailbox, connection: 1, slot: 1, tag: request.tag)
        switch dispatcher.handle(request, reply) {
        case .now(let bytes): return bytes
        case .nowFile(let header, let fd, _): fd.close(); return header
        case .later: return nil
        }
    }

    /// Drops answers that arrived later (the harness has no connection).
    public func drain() {
        for d in mailbox.drain() { for c in d.chunks { c.release() } }
    }
}

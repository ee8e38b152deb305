import CacheFetch
import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// The daemon's request handling without sockets, for the request fuzz
/// target: the real dispatcher over the real service and a real store in
/// `directory` (which the caller seeds), with no origin configured, so
/// nothing is ever fetched. HTTP requests go through the real HTTP
/// front-end over the same service (admin off).
public final class DispatchHarness: Sendable {
    private let dispatcher: Dispatcher
    private let http: HTTPFrontEnd
    private let mailbox: Mailbox

    public init(directory: String) throws(CacheError) {
        var settings = Settings()
        settings.store = directory
        var configuration = settings.serviceConfiguration
        configuration.workerThreads = 1
        let service = try CacheService.open(configuration, userAgent: "cached-fuzz", log: Logger(level: .error, environment: [:]))
        dispatcher = Dispatcher(service: service, socketPath: "fuzz")
        http = HTTPFrontEnd(service: service, allowAdmin: false)
        do { mailbox = try Mailbox() } catch { throw .store(.io(error), doing: "eventfd") }
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
        case .nowFile(let header, let fd, _, _): fd.close(); return header
        case .nowPassing(let line, let fd): fd.close(); return line
        case .later: return nil
        }
    }

    /// Handles one parsed HTTP request; returns the answer's bytes when it
    /// is immediate (for a file: the head alone), and whether a file follows.
    public func handle(_ request: CacheHTTP.HTTPRequest) -> (bytes: [UInt8], file: Bool)? {
        let reply = Reply(mailbox: mailbox, connection: 1, slot: 1, tag: nil)
        defer { http.closed(connection: 1) }
        switch http.handle(request, reply) {
        case .now(let bytes): return (bytes, false)
        case .nowFile(let head, let fd, _, _): fd.close(); return (head, true)
        case .nowPassing(let bytes, let fd): fd.close(); return (bytes, false)
        case .later: return nil
        }
    }

    /// The answer to a refused HTTP head.
    public func rejected(_ r: HTTPRejection) -> [UInt8] { http.rejected(r) }

    /// Drops answers that arrived later (the harness has no connection).
    public func drain() {
        for d in mailbox.drain().deliveries { for c in d.chunks { c.release() } }
    }
}

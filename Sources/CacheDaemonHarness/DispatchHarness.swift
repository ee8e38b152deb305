#if canImport(Glibc)
import Glibc
#endif
@_spi(Harness) import CacheDaemon
import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// The daemon's request handling without sockets, for the request fuzz
/// target and the dispatcher's unit tests: the real dispatcher over the
/// real service and a real store in `directory` (which the caller seeds),
/// with no origin configured, so nothing is ever fetched. HTTP requests go
/// through the real HTTP front-end over the same service, its events
/// published as the daemon publishes them (`Daemon`). A module of its own,
/// so that none of it is in the daemon: it reaches the daemon's handlers
/// through their `@_spi(Harness)` declarations.
public final class DispatchHarness: Sendable {
    private let dispatcher: Dispatcher
    private let http: HTTPFrontEnd
    private let mailbox: Mailbox
    /// The service both front-ends call.
    public let service: CacheService

    /// `allowAdmin`: the HTTP admin routes (`http-allow-admin`).
    public init(directory: String, allowAdmin: Bool = false) throws(CacheError) {
        var settings = Settings()
        settings.store = directory
        var configuration = settings.serviceConfiguration
        configuration.workerThreads = 1
        service = try CacheService.open(configuration, userAgent: "cached-fuzz", log: Logger(level: .error, environment: [:]))
        dispatcher = Dispatcher(service: service, socketPath: "fuzz")
        http = HTTPFrontEnd(service: service, allowAdmin: allowAdmin)
        service.onEvent = { [events = http.events] in events.publish($0) }
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
        case .nowPassing(let line, let fds): for fd in fds { fd.close() }; return line
        case .later: return nil
        }
    }

    /// Handles one parsed HTTP request; returns the answer's bytes when it
    /// is immediate (for a file: the head alone), and whether a file follows.
    public func handle(_ request: HTTPRequest) -> (bytes: [UInt8], file: Bool)? {
        let reply = Reply(mailbox: mailbox, connection: 1, slot: 1, tag: nil)
        defer { http.closed(connection: 1) }
        switch http.handle(request, reply) {
        case .now(let bytes): return (bytes, false)
        case .nowFile(let head, let fd, _, _): fd.close(); return (head, true)
        case .nowPassing(let bytes, let fds): for fd in fds { fd.close() }; return (bytes, false)
        case .later: return nil
        }
    }

    /// The answer to a refused HTTP head.
    public func rejected(_ r: HTTPRejection) -> [UInt8] { http.rejected(r) }

    /// The whole answer to one request line, now or later (waiting up to
    /// `timeout` for it), files read in and descriptors passed counted:
    /// what a client would receive. For unit tests of the dispatcher (as
    /// swift-nio tests handlers with its embedded channel).
    /// A line that does not parse gets the error line the loop answers it with.
    public func answer(_ line: [UInt8], timeout: Duration = .seconds(10)) -> (bytes: [UInt8], passed: Int)? {
        let request: Request
        switch Request.parse(line) {
        case .success(let r): request = r
        case .failure(let e): return (Response.error(e.error, tag: e.tag), 0)
        }
        let reply = Reply(mailbox: mailbox, connection: 1, slot: nextSlot(), tag: request.tag)
        return complete(dispatcher.handle(request, reply), reply, timeout)
    }

    /// The whole answer to one HTTP request, head and body, now or later.
    public func answer(_ request: HTTPRequest, timeout: Duration = .seconds(10)) -> [UInt8]? {
        let reply = Reply(mailbox: mailbox, connection: 1, slot: nextSlot(), tag: nil)
        defer { http.closed(connection: 1) }
        return complete(http.handle(request, reply), reply, timeout)?.bytes
    }

    private let slots = Locked<UInt64>(1)
    private func nextSlot() -> UInt64 { slots.withLock { $0 += 1; return $0 } }

    /// `answer`'s bytes, or the deliveries of its slot until the last.
    private func complete(_ answer: Answer, _ reply: Reply, _ timeout: Duration) -> (bytes: [UInt8], passed: Int)? {
        var chunks: [OutputChunk]
        switch answer {
        case .now(let bytes): return (bytes, 0)
        case let .nowFile(head, fd, offset, length): chunks = [.bytes(head), .file(fd, offset: offset, size: length)]
        case let .nowPassing(line, fds): chunks = [.descriptors(fds), .bytes(line)]
        case .later:
            chunks = []
            let deadline = Clock.instant(after: timeout)
            var done = false
            while !done {
                for d in mailbox.drain().deliveries {
                    guard d.slot == reply.slot else { for c in d.chunks { c.release() }; continue }
                    // A sized listing is granted at once (there is no loop and no bound here).
                    if let sized = d.sized { chunks += sized.make().map { .bytes($0) }; done = true; continue }
                    chunks += d.chunks
                    done = done || d.done
                }
                if !done {
                    guard Clock.monotonicNanoseconds() < deadline else { for c in chunks { c.release() }; return nil }
                    usleep(1000)
                }
            }
        }
        return Self.flatten(chunks)
    }

    /// The bytes a client gets from `chunks` (files read, descriptors counted and closed).
    private static func flatten(_ chunks: [OutputChunk]) -> (bytes: [UInt8], passed: Int) {
        var bytes: [UInt8] = [], passed = 0
        for chunk in chunks {
            switch chunk {
            case .bytes(let b): bytes += b
            case let .file(fd, offset, size):
                var buffer = [UInt8](repeating: 0, count: Int(size))
                var read = 0
                while read < buffer.count {
                    let n = (try? buffer.withMutableBytes { (b) throws(SystemError) -> Int in
                        try fd.read(into: UnsafeMutableRawBufferPointer(rebasing: b[read...]), at: offset + Int64(read))
                    }) ?? 0
                    if n <= 0 { break }  // a file cut short: the client gets what there is, as over a socket
                    read += n
                }
                bytes += buffer.prefix(read)
                fd.close()
            case .descriptors(let fds):
                passed += fds.count
                for fd in fds { fd.close() }
            }
        }
        return (bytes, passed)
    }

    /// An answer that does not end (`/events`): its bytes so far, taken
    /// from the mailbox until `enough` holds for them or `timeout` passes.
    /// The stream stays open until `close(stream:)`.
    public func stream(_ request: HTTPRequest, connection: UInt64, timeout: Duration = .seconds(10),
                       until enough: ([UInt8]) -> Bool) -> [UInt8] {
        let reply = Reply(mailbox: mailbox, connection: connection, slot: nextSlot(), tag: nil)
        var bytes: [UInt8] = []
        switch http.handle(request, reply) {
        case .now(let b): return b
        case .nowFile(let head, let fd, _, _): fd.close(); return head
        case .nowPassing(let b, let fds): for fd in fds { fd.close() }; return b
        case .later: break
        }
        more(bytes: &bytes, connection: connection, timeout: timeout, until: enough)
        return bytes
    }

    /// More of the stream on `connection`, appended to `bytes`, until `enough` or `timeout`.
    public func more(bytes: inout [UInt8], connection: UInt64, timeout: Duration = .seconds(10),
                     until enough: ([UInt8]) -> Bool) {
        let deadline = Clock.instant(after: timeout)
        while !enough(bytes) && Clock.monotonicNanoseconds() < deadline {
            for d in mailbox.drain().deliveries {
                guard d.connection == connection else { for c in d.chunks { c.release() }; continue }
                bytes += Self.flatten(d.chunks).bytes
            }
            if !enough(bytes) { usleep(1000) }
        }
    }

    /// The client of `connection` went away: its stream ends.
    public func close(stream connection: UInt64) { http.closed(connection: connection) }

    /// Shuts the service down (its threads end, its store closes), as the
    /// daemon does when it stops; the harness answers nothing after it.
    public func close() {
        service.onEvent = nil
        drain()
        service.shutdown()
    }

    /// Drops answers that arrived later (the harness has no connection).
    public func drain() {
        for d in mailbox.drain().deliveries { for c in d.chunks { c.release() } }
    }
}

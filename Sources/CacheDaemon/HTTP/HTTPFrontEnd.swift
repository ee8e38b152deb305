import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// The HTTP front-end: each route a call of the service API, as the
/// socket's `Dispatcher` is for JSON lines (docs/http.md, "Routes"). Runs on
/// the loop thread; answers that come later are posted through the `Reply`.
@_spi(Harness) public final class HTTPFrontEnd: HTTPHandling, Sendable {
    let service: CacheService
    let limits: HTTPLimits
    /// Mutations (prefetch, verify, gc, compact) as POST: `http-allow-admin`.
    let allowAdmin: Bool
    let responses = HTTPResponses()
    @_spi(Harness) public let events: EventHub
    /// The Host check and the admin routes' Origin check.
    let hosts: HTTPHostPolicy
    /// Store paths in `/images` rows and error messages (`http-show-paths`).
    let showPaths: Bool

    init(service: CacheService, allowAdmin: Bool, hosts: HTTPHostPolicy = HTTPHostPolicy(), showPaths: Bool = false,
         limits: HTTPLimits = HTTPLimits()) {
        self.service = service
        self.allowAdmin = allowAdmin
        self.hosts = hosts
        self.showPaths = showPaths
        self.limits = limits
        events = EventHub(responses: responses)
    }

    /// A front-end with the default host policy, limits and paths hidden.
    @_spi(Harness) public convenience init(service: CacheService, allowAdmin: Bool) {
        self.init(service: service, allowAdmin: allowAdmin, hosts: HTTPHostPolicy())
    }

    static let readMethods = "GET, HEAD"

    /// The answer to `request`: now, or later through `reply`.
    @_spi(Harness) public func handle(_ request: HTTPRequest, _ reply: Reply) -> Answer {
        // A page elsewhere may rebind a name of its own to this address, and a
        // proxy in front passes it on: on every listener, only a request for
        // an address, localhost or an allowed name is served.
        if let why = hosts.refusal(request.authority) {
            return .now(fail(.misdirected, .badRequest, why, request))
        }
        let path = request.path
        // `/posts/` and `//x` name nothing (only `/` is an empty path).
        if path.count > 1 && path.contains("") {
            return .now(fail(.notFound, .notFound, "no such resource: /\(path.joined(separator: "/"))", request))
        }
        switch path.first ?? "" {
        case "" where path.count == 1:
            return readOnly(request) { .now(responses.body(.ok, request, type: "text/html; charset=utf-8", IndexPage.html(admin: allowAdmin)) {
                $0.field("Cache-Control", "no-cache")
                $0.field("Content-Security-Policy", "default-src 'none'; connect-src 'self'; img-src 'self' data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
            }) }
        case "posts" where path.count <= 2:
            return readOnly(request) { path.count == 1 ? posts(request, reply) : post(path[1], request) }
        case "images" where path.count <= 2:
            return readOnly(request) { path.count == 1 ? images(request, reply) : image(path[1], request, reply) }
        case "objects" where path.count == 2:
            return readOnly(request) { objectByHash(path[1], request, reply) }
        case "metrics" where path.count == 1:
            return readOnly(request) { .now(metrics(request)) }
        case "healthz" where path.count == 1:
            return readOnly(request) { .now(responses.body(.ok, request, type: HTTPResponses.json, Array("{\"ok\":true}\n".utf8))) }
        case "events" where path.count == 1:
            return readOnly(request) { events.subscribe(request, reply) }
        case "prefetch" where path.count == 1, "verify" where path.count == 1, "gc" where path.count == 1,
             "compact" where path.count == 1:
            return admin(path[0], request, reply)
        default:
            return .now(fail(.notFound, .notFound, "no such resource: /\(path.joined(separator: "/"))", request))
        }
    }

    /// GET and HEAD only: anything else is 405 with `Allow`.
    private func readOnly(_ request: HTTPRequest, _ route: () -> Answer) -> Answer {
        switch request.method {
        case .get, .head: return route()
        default:
            return .now(fail(.methodNotAllowed, .badRequest, "only GET and HEAD are allowed here", request) {
                $0.field("Allow", Self.readMethods)
            })
        }
    }

    // MARK: Posts and images

    /// `/posts`: `offset`, `limit`, `q` (a title search, as `list_posts`'s
    /// `query`) and `with_ids=1` (each item `{"id":..., "post":...}`).
    private func posts(_ request: HTTPRequest, _ reply: Reply) -> Answer {
        let page: (offset: Int, limit: Int?), query: String?, withIDs: Bool
        do throws(CacheError) {
            page = try paging(request)
            query = try searchQuery(request)
            withIDs = try flag(request, "with_ids")
        } catch { return .now(failure(error, request)) }
        let make: @Sendable (PostsPage) -> [[UInt8]] = { [self] p in listingChunks(request, total: p.total, Self.postsBody(p, withIDs: withIDs)) }
        let sized = sized(request, bodySize: { Self.postsBodySize($0, withIDs: withIDs) }, make)
        return Answering.listing(reply, respond(request) { Array(make($0).joined()) }, sized: sized) {
            service.posts(offset: page.offset, limit: page.limit, query: query, then: $0)
        }
    }

    private func post(_ text: String, _ request: HTTPRequest) -> Answer {
        // The decoded segment as cachectl reads its argument: the integer id
        // when it spells one, else a string id; `post(id:)` finds the other
        // kind of the same spelling when there is none. `?kind=string` asks
        // for the string first (docs/http.md, "/posts/{id}").
        guard let asString = PostID(string: text) else {
            return .now(fail(.badRequest, .badRequest, "a post id is at most \(PostID.maxStringBytes) bytes", request))
        }
        let id: PostID
        switch request.query("kind") {
        case nil, "": id = asString.otherSpelling ?? asString
        case "string": id = asString
        case "integer":
            guard let integer = asString.otherSpelling else {
                return .now(fail(.badRequest, .badRequest, "kind=integer needs an id spelled as an integer", request))
            }
            id = integer
        default: return .now(fail(.badRequest, .badRequest, "kind is integer or string", request))
        }
        switch service.post(id: id) {
        case .success(let post): return .now(responses.body(.ok, request, type: HTTPResponses.json, post.json))
        case .failure(let e): return .now(failure(e, request))
        }
    }

    private func images(_ request: HTTPRequest, _ reply: Reply) -> Answer {
        let page: (offset: Int, limit: Int?)
        do throws(CacheError) { page = try paging(request) } catch { return .now(failure(error, request)) }
        let make: @Sendable (ImagesPage) -> [[UInt8]] = { [self] p in listingChunks(request, total: p.total, Self.imagesBody(p, withPaths: showPaths)) }
        return Answering.listing(reply, respond(request) { Array(make($0).joined()) }, sized: sized(request, bodySize: Self.imagesBodySize, make)) {
            service.images(offset: page.offset, limit: page.limit, then: $0)
        }
    }

    /// `/images/{row}`: the row's image (downloaded first on a miss unless `?fetch=0`).
    private func image(_ text: String, _ request: HTTPRequest, _ reply: Reply) -> Answer {
        guard let row = Self.integer(text).flatMap({ Int(exactly: $0) }), row >= 0 else {
            return .now(fail(.badRequest, .badRequest, "a row is a decimal integer from 0", request))
        }
        let fetch: Bool
        switch request.query("fetch") {
        case nil, "1", "true": fetch = true
        case "0", "false": fetch = false
        default: return .now(fail(.badRequest, .badRequest, "fetch is 0 or 1", request))
        }
        let variant: VariantRequest?
        do throws(CacheError) { variant = try Self.variantRequest(request) } catch { return .now(failure(error, request)) }
        return Answering.answer(reply, respond(request) { [self] body in objectAnswer(body, request, cacheControl: Self.revalidate) }) {
            service.imageBody(row: row, variant: variant, fetch: fetch, plan: { Self.plan($0, request) }, then: $0)
        }
    }

    /// `/objects/{hash}`: content-addressed, so cacheable for ever.
    /// One being repaired (set aside and downloaded again) is answered once it is back.
    private func objectByHash(_ text: String, _ request: HTTPRequest, _ reply: Reply) -> Answer {
        guard let hash = Hash128(hex: text) else { return .now(fail(.badRequest, .badRequest, "\"hash\" must be 32 lowercase hex digits", request)) }
        return Answering.answer(reply, respond(request) { [self] body in objectAnswer(body, request, cacheControl: Self.immutable) }) {
            service.objectBody(hash: hash, plan: { Self.plan($0, request) }, then: $0)
        }
    }

    // MARK: Metrics

    /// What `cachectl metrics` prints: the status answer, through the same formatter.
    private func metrics(_ request: HTTPRequest) -> [UInt8] {
        let line = AnswerEncoding.status(service.status(), socket: "", tag: nil)
        // The daemon's own line: a failure is a bug, answered 500, not dropped.
        guard let json = try? JSONParser.parse(line.dropLast()) else {
            return fail(.internalError, .internal, "the status could not be read back", request)
        }
        return responses.body(.ok, request, type: MetricsText.contentType, Array(MetricsText.render(json).utf8))
    }

    // MARK: HTTPHandling

    /// The answer to a head the parser refused (400, 413, 431 ...).
    @_spi(Harness) public func rejected(_ rejection: HTTPRejection) -> [UInt8] {
        responses.rejected(rejection)  // the loop counts it as an error
    }

    func keepsAlive(_ request: HTTPRequest) -> Bool {
        // An HTTP/1.0 event stream has no framing: it ends with the connection.
        request.keepAlive && !(request.minorVersion == 0 && request.path == ["events"])
    }

    let continueHead: [UInt8] = {
        var h = HTTPHead(.continue100)
        return h.finish()
    }()

    func timedOut() -> [UInt8] {
        responses.error(.requestTimeout, .badRequest, "the request did not arrive in time (http-request-timeout)", nil)
    }

    func busy(_ limit: LimitReached) -> [UInt8] {
        let e = ProtocolError(limit)
        return responses.error(.unavailable, e.code, e.message, nil) {
            $0.field("Retry-After", 1)
        }
    }

    /// The connection `id` closed: its event stream, if any, ends.
    @_spi(Harness) public func closed(connection id: UInt64) { events.unsubscribe(connection: id) }

    /// Once a second from the loop: the event streams' keep-alive.
    func tick() { events.tick() }

    // MARK: Helpers

    /// `offset` and `limit` from the query, as `list_posts` takes them.
    private func paging(_ request: HTTPRequest) throws(CacheError) -> (offset: Int, limit: Int?) {
        func number(_ name: String) throws(CacheError) -> Int? {
            guard let text = request.query(name) else { return nil }
            guard let v = Self.integer(text).flatMap({ Int(exactly: $0) }), v >= 0 else {
                throw .invalid("\(name) is a decimal integer from 0")
            }
            return v
        }
        return (try number("offset") ?? 0, try number("limit"))
    }

    /// `q`: at most `Request.maxQueryBytes` bytes; nil when absent or empty.
    private func searchQuery(_ request: HTTPRequest) throws(CacheError) -> String? {
        guard let q = request.query("q"), !q.isEmpty else { return nil }
        guard q.utf8.count <= Request.maxQueryBytes else { throw .invalid("q is at most \(Request.maxQueryBytes) bytes") }
        return q
    }

    /// A flag of the query: `1` or `true`, `0` or `false`; false when absent.
    private func flag(_ request: HTTPRequest, _ name: String) throws(CacheError) -> Bool {
        switch request.query(name) {
        case nil, "0", "false": return false
        case "1", "true": return true
        default: throw .invalid("\(name) is 0 or 1")
        }
    }

    /// A decimal integer without sign or spaces (at most 18 digits).
    static func integer(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 18, text.utf8.allSatisfy(ASCII.isDigit) else { return nil }
        return Int64(text)
    }

    /// A result as an answer: `encode`'s body for a success, the error's status and body for a failure.
    func respond<V>(_ request: HTTPRequest, _ encode: @escaping @Sendable (V) -> [UInt8]) -> @Sendable (Result<V, CacheError>) -> Answer {
        respond(request) { (v: V) -> Answer in .now(encode(v)) }
    }

    /// A result as an answer: `answer` of a success, the error's status and body for a failure.
    func respond<V>(_ request: HTTPRequest, _ answer: @escaping @Sendable (V) -> Answer) -> @Sendable (Result<V, CacheError>) -> Answer {
        { [self] result in
            switch result {
            case .success(let v): return answer(v)
            case .failure(let e): return .now(failure(e, request))
            }
        }
    }

    /// An error answer, counted as one.
    func fail(_ status: HTTPStatus, _ code: ErrorCode, _ message: String, _ request: HTTPRequest,
              extra: (inout HTTPHead) -> Void = { _ in }) -> [UInt8] {
        service.noteRequests(0, errors: 1)
        return responses.error(status, code, message, request, extra: extra)
    }

    /// The answer for a service failure, counted as an error; without the
    /// paths in its message unless `showPaths`.
    func failure(_ e: CacheError, _ request: HTTPRequest) -> [UInt8] {
        service.noteRequests(0, errors: 1)
        let code = ProtocolError.code(e)
        if case .partialPrefetch(let done, _) = e {
            let line = AnswerEncoding.prefetchFailure(shown(done), ProtocolError(code, shown(e.description)), tag: nil)
            return responses.body(HTTPResponses.status(code), request, type: HTTPResponses.json, line)
        }
        return responses.error(HTTPResponses.status(code), code, shown(e.description), request)
    }
}

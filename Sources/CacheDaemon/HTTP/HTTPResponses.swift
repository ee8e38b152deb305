import CacheHTTP
import CacheProtocol
import CacheService
import CacheSystem

/// Response heads and small bodies, made on any thread (docs/http.md,
/// "Headers"). Every answer has `Content-Length` (but the event stream),
/// `Date`, and `Connection: close` when the connection closes after it.
struct HTTPResponses: Sendable {
    let date = Locked(HTTPDate())

    static let server = "cached/\(cachedVersion)"

    /// A head for `status` in answer to `request`, with the fields every answer has.
    func head(_ status: HTTPStatus, _ request: HTTPRequest?) -> HTTPHead {
        var h = HTTPHead(status)
        h.field("Server", Self.server)
        h.field("Date", raw: date.withLock { $0.now() })
        h.field("X-Content-Type-Options", "nosniff")
        if let request {
            if !request.keepAlive { h.field("Connection", "close") }
            else if request.minorVersion == 0 { h.field("Connection", "keep-alive") }
        } else {
            h.field("Connection", "close")
        }
        return h
    }

    /// A whole answer with `body` (none sent for HEAD).
    func body(_ status: HTTPStatus, _ request: HTTPRequest?, type: String, _ body: [UInt8],
              extra: (inout HTTPHead) -> Void = { _ in }) -> [UInt8] {
        var h = head(status, request)
        h.field("Content-Type", type)
        h.field("Content-Length", body.count)
        extra(&h)
        return h.finish(body: request?.method == .head ? [] : body)
    }

    static let json = "application/json"

    /// An error answer: `{"ok":false,"error":{"code":...,"message":...}}`,
    /// the socket's error line (docs/protocol.md, "Errors").
    func error(_ status: HTTPStatus, _ code: ErrorCode, _ message: String, _ request: HTTPRequest?,
               extra: (inout HTTPHead) -> Void = { _ in }) -> [UInt8] {
        body(status, request, type: Self.json, Response.error(ProtocolError(code, message), tag: nil), extra: extra)
    }

    /// The status of each protocol error code.
    static func status(_ code: ErrorCode) -> HTTPStatus {
        switch code {
        case .badRequest: return .badRequest
        case .notFound, .notCached: return .notFound
        case .upstream: return .badGateway
        case .tooLarge: return .contentTooLarge
        case .busy: return .unavailable
        case .internal: return .internalError
        }
    }

    /// The answer to a refused head (the connection closes after it).
    func rejected(_ r: HTTPRejection) -> [UInt8] {
        let code: ErrorCode = switch r.status.code {
        case 413, 414, 431: .tooLarge
        default: .badRequest
        }
        return error(r.status, code, r.message, nil)
    }

    /// `304 Not Modified` for `etag`.
    func notModified(_ request: HTTPRequest, etag: String, cacheControl: String) -> [UInt8] {
        var h = head(.notModified, request)
        h.field("ETag", etag)
        h.field("Cache-Control", cacheControl)
        return h.finish()
    }
}

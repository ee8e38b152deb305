/// A parsed HTTP/1.x request head (RFC 9112), with the few fields the
/// front-end acts on. Header values it does not use are not kept.
public struct HTTPRequest: Sendable, Equatable {
    public enum Method: Sendable, Equatable {
        case get, head, post
        /// Any other token (PUT, DELETE, OPTIONS, ...): answered 405.
        case other(String)
    }

    public var method: Method
    /// The path's segments, percent-decoded: `/images/3` is `["images", "3"]`,
    /// `/` is `[""]`. None holds `/`, NUL, or is `.` or `..`.
    public var path: [String]
    /// The query's `name=value` pairs in order, percent-decoded (`+` is a space).
    public var query: [(name: String, value: String)]
    /// 0 for HTTP/1.0, 1 for HTTP/1.1.
    public var minorVersion: Int
    /// False when the connection closes after the answer: `Connection: close`,
    /// or HTTP/1.0 without `Connection: keep-alive`.
    public var keepAlive: Bool
    /// The body's length (`Content-Length`); the front-end reads and ignores it.
    public var contentLength: Int
    public var host: String?
    /// `host` read (or an absolute-form target's authority), once, by the parser.
    public var authority: HTTPAuthority?
    public var ifNoneMatch: String?
    public var range: String?
    public var ifRange: String?
    public var origin: String?
    /// The body's media type (`Content-Type`), lowercased, without parameters.
    public var contentType: String?
    /// `Expect: 100-continue`: the client waits for `100 Continue` before its body.
    public var expectsContinue = false
    /// `X-Forwarded-Proto`, repeated lines joined with `, ` (read only when
    /// the front-end is told to trust its proxy).
    public var forwardedProto: String?
    /// `Forwarded` (RFC 7239), repeated lines joined with `, `.
    public var forwarded: String?

    public init(method: Method, path: [String], query: [(name: String, value: String)] = [], minorVersion: Int = 1,
                keepAlive: Bool = true, contentLength: Int = 0, host: String? = nil, ifNoneMatch: String? = nil,
                range: String? = nil, ifRange: String? = nil, origin: String? = nil) {
        self.method = method
        self.path = path
        self.query = query
        self.minorVersion = minorVersion
        self.keepAlive = keepAlive
        self.contentLength = contentLength
        self.host = host
        self.ifNoneMatch = ifNoneMatch
        self.range = range
        self.ifRange = ifRange
        self.origin = origin
    }

    /// The last value of query parameter `name`, if given.
    public func query(_ name: String) -> String? {
        query.last { $0.name == name }?.value
    }

    public static func == (a: HTTPRequest, b: HTTPRequest) -> Bool {
        a.method == b.method && a.path == b.path && a.query.map(\.name) == b.query.map(\.name)
            && a.query.map(\.value) == b.query.map(\.value) && a.minorVersion == b.minorVersion
            && a.keepAlive == b.keepAlive && a.contentLength == b.contentLength && a.host == b.host
            && a.ifNoneMatch == b.ifNoneMatch && a.range == b.range && a.ifRange == b.ifRange && a.origin == b.origin
            && a.contentType == b.contentType && a.expectsContinue == b.expectsContinue
            && a.forwardedProto == b.forwardedProto && a.forwarded == b.forwarded && a.authority == b.authority
    }
}

/// Why a request head was refused: the status to answer and a message for
/// the body. The connection is closed after the answer: past a malformed
/// head, where the next request starts is not known.
public struct HTTPRejection: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HTTPStatus
    public var message: String

    public init(_ status: HTTPStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { "\(status.code) \(status.reason): \(message)" }
}

/// The limits on a request head (docs/http.md, "Limits").
public struct HTTPLimits: Sendable, Equatable {
    /// The longest request line (method, target, version); longer: 414.
    public var maxRequestLine: Int
    /// The most bytes of the whole head, request line and headers; more: 431.
    public var maxHeadBytes: Int
    /// The most header fields; more: 431.
    public var maxHeaders: Int
    /// The longest request body read (and ignored); longer: 413.
    public var maxBody: Int

    public init(maxRequestLine: Int = 8192, maxHeadBytes: Int = 16384, maxHeaders: Int = 100, maxBody: Int = 16384) {
        self.maxRequestLine = maxRequestLine
        self.maxHeadBytes = maxHeadBytes
        self.maxHeaders = maxHeaders
        self.maxBody = maxBody
    }
}

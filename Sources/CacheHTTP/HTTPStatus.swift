/// The status codes the front-end answers with, and their reason phrases.
public struct HTTPStatus: Sendable, Equatable, Hashable {
    public var code: Int
    public var reason: String

    public init(_ code: Int, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static let continue100 = HTTPStatus(100, "Continue")
    public static let ok = HTTPStatus(200, "OK")
    public static let partialContent = HTTPStatus(206, "Partial Content")
    public static let notModified = HTTPStatus(304, "Not Modified")
    public static let badRequest = HTTPStatus(400, "Bad Request")
    public static let forbidden = HTTPStatus(403, "Forbidden")
    public static let notFound = HTTPStatus(404, "Not Found")
    public static let methodNotAllowed = HTTPStatus(405, "Method Not Allowed")
    public static let requestTimeout = HTTPStatus(408, "Request Timeout")
    public static let lengthRequired = HTTPStatus(411, "Length Required")
    public static let contentTooLarge = HTTPStatus(413, "Content Too Large")
    public static let uriTooLong = HTTPStatus(414, "URI Too Long")
    public static let rangeNotSatisfiable = HTTPStatus(416, "Range Not Satisfiable")
    public static let expectationFailed = HTTPStatus(417, "Expectation Failed")
    public static let misdirected = HTTPStatus(421, "Misdirected Request")
    public static let headersTooLarge = HTTPStatus(431, "Request Header Fields Too Large")
    public static let internalError = HTTPStatus(500, "Internal Server Error")
    public static let badGateway = HTTPStatus(502, "Bad Gateway")
    public static let unavailable = HTTPStatus(503, "Service Unavailable")
    public static let versionNotSupported = HTTPStatus(505, "HTTP Version Not Supported")
}
